// The cost of granting a plugin instance access to bound buffers by mapping them into its
// linear memory, per launch, against copying them (BENCHMARKS.md, "Zero-copy by mapping").
// Three 256 KiB bindings (an Add of 64 Ki f32): map + populate + unmap, or mprotect
// toggling of windows mapped once, against one memcpy of the same 768 KiB.
//   gcc -O2 -o /tmp/mapcost scripts/mapcost.c -lpthread && /tmp/mapcost && /tmp/mapcost spin
// (`spin`: another thread of the process runs, as the device's workers do: every revocation
// then shoots down that CPU's TLB too.)
#define _GNU_SOURCE
#include <sys/mman.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <string.h>
#include <pthread.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
void* spin(void*a){volatile long x=0;for(;;){x++;}}
int main(int argc,char**argv){
  if(argc>1){pthread_t t;pthread_create(&t,0,spin,0);}
  size_t SZ=256*1024; int fd=memfd_create("seg",0); ftruncate(fd,64<<20);
  char*host=mmap(0,64<<20,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); memset(host,1,64<<20);
  char*arena=mmap(0,1<<30,PROT_NONE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);
  int N=2000; double t0=now(); volatile long s=0;
  for(int i=0;i<N;i++){ for(int b=0;b<3;b++){ char*w=arena+b*SZ; mmap(w,SZ,PROT_READ|PROT_WRITE,MAP_FIXED|MAP_SHARED|MAP_POPULATE,fd,b*SZ); }
    for(int b=0;b<3;b++) s+=arena[b*SZ+4096*7];
    for(int b=0;b<3;b++){ mmap(arena+b*SZ,SZ,PROT_NONE,MAP_FIXED|MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);} }
  double t1=now(); printf("map+populate+unmap 3x256K: %.2f us/launch\n",(t1-t0)/N);
  for(int b=0;b<3;b++){ mmap(arena+b*SZ,SZ,PROT_NONE,MAP_FIXED|MAP_SHARED|MAP_POPULATE,fd,b*SZ);} 
  for(int b=0;b<3;b++){ mprotect(arena+b*SZ,SZ,PROT_READ|PROT_WRITE); for(size_t k=0;k<SZ;k+=4096) s+=arena[b*SZ+k]; mprotect(arena+b*SZ,SZ,PROT_NONE);}
  t0=now();
  for(int i=0;i<N;i++){ for(int b=0;b<3;b++) mprotect(arena+b*SZ,SZ,PROT_READ|PROT_WRITE);
    for(int b=0;b<3;b++) for(size_t k=0;k<SZ;k+=4096) s+=arena[b*SZ+k];
    for(int b=0;b<3;b++) mprotect(arena+b*SZ,SZ,PROT_NONE);}
  t1=now(); printf("mprotect toggle 3x256K + touch all pages: %.2f us/launch\n",(t1-t0)/N);
  t0=now();
  for(int i=0;i<N;i++){ for(int b=0;b<3;b++){ char*w=arena+b*SZ; mmap(w,SZ,PROT_READ|PROT_WRITE,MAP_FIXED|MAP_SHARED|MAP_POPULATE,fd,b*SZ); }
    for(int b=0;b<3;b++) for(size_t k=0;k<SZ;k+=4096) s+=arena[b*SZ+k];
    for(int b=0;b<3;b++){ mmap(arena+b*SZ,SZ,PROT_NONE,MAP_FIXED|MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);} }
  t1=now(); printf("map+populate+touch+unmap: %.2f us/launch\n",(t1-t0)/N);
  t0=now();
  for(int i=0;i<N;i++){ memcpy(host+(8<<20),host,3*SZ);} t1=now(); printf("memcpy 768K: %.2f us\n",(t1-t0)/N);
  return 0;}
