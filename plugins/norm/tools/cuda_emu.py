#!/usr/bin/env python3
"""Runs CUDA kernels on the host, without a GPU, and compares them with the CPU kernels.

The `cuda_emulation_vectors` tests of the norm and matmul plugins write, when UMD_DUMP_VECTORS
names a directory, every CUDA module they use (`<module>.cu`) and `<plugin>.cases` (each case:
one planned launch, its parameter block and relocations, its input buffers, and the CPU kernels'
outputs). This script compiles each module as C++20 with g++ and AddressSanitizer (a shim for
the CUDA built-ins: one OS thread per CUDA thread, `__syncthreads` a block barrier,
`__shfl_down_sync` through a per-warp exchange, `__shared__` a static, the prelude's PTX f16
conversions replaced by `_Float16` ones), runs every case with exactly-sized buffers (so an
out-of-bounds read or write is reported) and compares the outputs with the CPU kernels'.

    UMD_DUMP_VECTORS=/tmp/emu cargo test -p umd-plugin-norm cuda_emulation
    UMD_DUMP_VECTORS=/tmp/emu cargo test -p umd-plugin-matmul cuda_emulation
    python3 plugins/norm/tools/cuda_emu.py /tmp/emu
"""
import glob
import os
import re
import struct
import subprocess
import sys
import tempfile

SHIM = r"""
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
struct umd_dim3 { unsigned x, y, z; };
static thread_local umd_dim3 blockIdx, threadIdx;
static umd_dim3 gridDim, blockDim;
static std::barrier<>* umd_block_bar;
static std::barrier<>* umd_warp_bar[32];
static unsigned long long umd_xchg[32][32];
static inline void __syncthreads() { umd_block_bar->arrive_and_wait(); }
static inline long long clock64() { return (long long)std::chrono::steady_clock::now().time_since_epoch().count(); }
static inline unsigned umd_linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
struct float4 { float x, y, z, w; };
template <typename T> static T __shfl_down_sync(unsigned, T v, int o) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  unsigned t = umd_linear_tid(), w = t / 32, lane = t % 32;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof(T));
  umd_xchg[w][lane] = bits;
  umd_warp_bar[w]->arrive_and_wait();
  T r = v;
  if (lane + o < 32) memcpy(&r, &umd_xchg[w][lane + o], sizeof(T));
  umd_warp_bar[w]->arrive_and_wait();
  return r;
}
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
"""

HOST_F16 = r"""
__device__ __forceinline__ float umd_h2f(umd_half h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
__device__ __forceinline__ umd_half umd_f2h(float f) { _Float16 h = (_Float16)f; umd_half r; memcpy(&r, &h, 2); return r; }
"""

MAIN = r"""
typedef void (*umd_entry)(const unsigned char*);
struct umd_named { const char* name; umd_entry fn; };
extern const umd_named umd_entries[];
static std::vector<unsigned char> unhex(const std::string& s) {
  std::vector<unsigned char> v(s.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (unsigned char)strtoul(s.substr(2 * i, 2).c_str(), 0, 16);
  return v;
}
int main() {
  // stdin: entry NAME / grid X Y Z / block X Y Z / params HEX / reloc OFF BIND... /
  // in BIND HEX / out BIND SIZE ... ; prints "out BIND HEX" per output
  std::string word, entry, params_hex;
  std::vector<std::pair<long, int>> relocs;
  std::vector<std::vector<unsigned char>> bufs(64);
  std::vector<int> outs;
  while (std::cin >> word) {
    if (word == "entry") std::cin >> entry;
    else if (word == "grid") std::cin >> gridDim.x >> gridDim.y >> gridDim.z;
    else if (word == "block") std::cin >> blockDim.x >> blockDim.y >> blockDim.z;
    else if (word == "params") std::cin >> params_hex;
    else if (word == "reloc") { long o; int b; std::cin >> o >> b; relocs.push_back({o, b}); }
    else if (word == "in") { int b; std::string h; std::cin >> b >> h; bufs[b] = unhex(h == "-" ? "" : h); }
    else if (word == "out") { int b; size_t n; std::cin >> b >> n; bufs[b].assign(n, 0xAB); outs.push_back(b); }
  }
  std::vector<unsigned char> params = unhex(params_hex);
  for (auto& [o, b] : relocs) { void* p = bufs[b].data(); memcpy(&params[o], &p, 8); }
  umd_entry fn = 0;
  for (const umd_named* e = umd_entries; e->name; ++e) if (entry == e->name) fn = e->fn;
  if (!fn) { fprintf(stderr, "no entry %s\n", entry.c_str()); return 2; }
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  for (unsigned bz = 0; bz < gridDim.z; ++bz)
    for (unsigned by = 0; by < gridDim.y; ++by)
      for (unsigned bx = 0; bx < gridDim.x; ++bx) {
        umd_block_bar = new std::barrier<>(n);
        for (unsigned w = 0; w < (n + 31) / 32; ++w) umd_warp_bar[w] = new std::barrier<>(n - 32 * w < 32 ? n - 32 * w : 32);
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < n; ++t)
          ts.emplace_back([=] {
            blockIdx = {bx, by, bz};
            threadIdx = {t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
            fn(params.data());
          });
        for (auto& t : ts) t.join();
        delete umd_block_bar;
        for (unsigned w = 0; w < (n + 31) / 32; ++w) delete umd_warp_bar[w];
      }
  for (int b : outs) {
    printf("out %d ", b);
    for (unsigned char c : bufs[b]) printf("%02x", c);
    if (bufs[b].empty()) printf("-");
    printf("\n");
  }
  return 0;
}
"""

KERNEL = re.compile(r'extern "C" __global__ void (\w+)\((.*?)\)\s*\{', re.S)


def wrappers(code):
    """One `umd_call_NAME(params)` per kernel: unpacks the block with C++'s own sizes and
    alignments (which CUDA's parameter layout follows) and calls the kernel."""
    out, names = [], []
    for name, params in KERNEL.findall(code):
        args = [p.strip() for p in params.replace("\n", " ").split(",")]
        decls, uses = [], []
        for i, a in enumerate(args):
            ty = a[: a.rstrip().rfind(" ")].strip()
            decls.append(
                f"  {ty} a{i}; off = (off + alignof(decltype(a{i})) - 1) / alignof(decltype(a{i}))"
                f" * alignof(decltype(a{i})); memcpy((void*)&a{i}, p + off, sizeof a{i}); off += sizeof a{i};"
            )
            uses.append(f"a{i}")
        out.append(
            f"static void umd_call_{name}(const unsigned char* p) {{\n  size_t off = 0;\n"
            + "\n".join(decls)
            + f"\n  {name}({', '.join(uses)});\n}}\n"
        )
        names.append(name)
    table = "extern const umd_named umd_entries[] = {" + "".join(
        f'{{"{n}", umd_call_{n}}}, ' for n in names
    ) + "{0, 0}};\n"
    return "".join(out) + table


def host_source(code):
    code = re.sub(r"__device__ __forceinline__ float umd_h2f\(umd_half h\) \{.*?\n\}\n", "", code, flags=re.S)
    code = re.sub(r"__device__ __forceinline__ umd_half umd_f2h\(float f\) \{.*?\n\}\n", "", code, flags=re.S)
    code = code.replace("typedef unsigned short umd_bf16;\n", "typedef unsigned short umd_bf16;\n" + HOST_F16)
    return SHIM + MAIN.split("int main")[0] + code + wrappers(code) + "int main" + MAIN.split("int main")[1]


def decode(dt, data):
    fmt = {"f32": "f", "f64": "d", "f16": "e", "i32": "i", "i64": "q", "u8": "B", "i8": "b",
           "bool": "B", "i16": "h", "u16": "H", "u32": "I", "u64": "Q"}
    if dt == "bf16":
        return [struct.unpack("<f", b"\0\0" + data[i : i + 2])[0] for i in range(0, len(data), 2)]
    size = struct.calcsize(fmt[dt])
    return list(struct.unpack(f"<{len(data) // size}{fmt[dt]}", data))


TOL = {"f32": (1e-5, 1e-4), "f16": (2e-3, 4e-3), "bf16": (1.6e-2, 1.6e-2), "f64": (1e-9, 1e-9)}


def compare(dt, got, want):
    g, w = decode(dt, got), decode(dt, want)
    if len(g) != len(w):
        return f"{len(g)} elements, want {len(w)}"
    a, r = TOL.get(dt, (0.0, 0.0))
    for i, (x, y) in enumerate(zip(g, w)):
        if x == y or (x != x and y != y) or abs(x - y) <= a + r * abs(y):
            continue
        return f"element {i}: got {x}, want {y}"
    return None


def parse_cases(path):
    cases, cur = [], None
    for line in open(path):
        w = line.split()
        if not w:
            continue
        if w[0] == "case":
            cur = {"name": w[1], "lines": [], "expect": {}}
        elif w[0] == "module":
            cur["module"] = w[1]
        elif w[0] == "expect":
            cur["expect"][int(w[1])] = (w[2], bytes.fromhex("" if w[3] == "-" else w[3]))
        elif w[0] == "end":
            cases.append(cur)
        else:
            cur["lines"].append(line)
    return cases


def main(d):
    cases = [c for p in sorted(glob.glob(os.path.join(d, "*.cases"))) for c in parse_cases(p)]
    tmp = tempfile.mkdtemp(prefix="cuda-emu-")
    binaries, failed = {}, 0
    for c in cases:
        m = c["module"]
        if m not in binaries:
            src = os.path.join(tmp, f"{m}.cpp")
            with open(src, "w") as f:
                f.write(host_source(open(os.path.join(d, f"{m}.cu")).read()))
            exe = os.path.join(tmp, m)
            r = subprocess.run(["g++", "-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=address,undefined",
                                "-fno-sanitize-recover=all", "-w", src, "-o", exe], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL compile {m}:\n{r.stderr[:4000]}")
                return 1
            binaries[m] = exe
        try:
            r = subprocess.run([binaries[m]], input="".join(c["lines"]), capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            print(f"FAIL {c['name']}: timed out (a barrier not reached by every thread?)")
            failed += 1
            continue
        if r.returncode != 0:
            print(f"FAIL {c['name']}: exit {r.returncode}\n{r.stderr[-3000:]}")
            failed += 1
            continue
        got = {}
        for line in r.stdout.splitlines():
            w = line.split()
            got[int(w[1])] = bytes.fromhex("" if w[2] == "-" else w[2])
        errors = [f"binding {b}: {e}" for b, (dt, want) in c["expect"].items()
                  if (e := compare(dt, got.get(b, b""), want))]
        if errors:
            print(f"FAIL {c['name']}: {'; '.join(errors)}")
            failed += 1
        else:
            print(f"ok   {c['name']}")
    print(f"{len(cases)} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
