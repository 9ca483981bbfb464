#!/usr/bin/env python3
"""Runs the plugin's CUDA kernels on the host, without a GPU: every CUDA module dumped by
`UMD_DUMP_CUDA` is compiled as C++ with g++ (a shim for the CUDA built-ins; the prelude's PTX
f16 conversions replaced by _Float16 ones), then each case dumped by `UMD_DUMP_VECTORS`
(src/tests/emu.rs) is run: the entry point's arguments are read from its relocated parameter
block (each at its alignment, as CUDA lays them out), every "thread" of a small grid runs in
turn, and the outputs are compared with the CPU kernels'.

    UMD_DUMP_CUDA=/tmp/cu UMD_DUMP_VECTORS=/tmp/vec cargo test -p umd-plugin-conv cuda dump
    python3 plugins/conv/tools/cuda_emu.py /tmp/cu /tmp/vec
"""
import glob
import os
import re
import struct
import subprocess
import sys
import tempfile

SHIM = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
struct umd_dim3 { unsigned x, y, z; };
static umd_dim3 blockIdx, threadIdx, gridDim, blockDim;
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
using std::isnan;
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
"""

HOST_F16 = r"""
__device__ __forceinline__ float umd_h2f(umd_half h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
__device__ __forceinline__ umd_half umd_f2h(float f) { _Float16 h = (_Float16)f; umd_half r; memcpy(&r, &h, 2); return r; }
"""

MAIN = r"""
static std::vector<unsigned char> unhex(const std::string& s) {
  std::vector<unsigned char> v(s.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (unsigned char)strtoul(s.substr(2 * i, 2).c_str(), 0, 16);
  return v;
}
int main(int argc, char** argv) {
  // argv: entry, params-hex, then per binding: hex (inputs) or "out:<bytes>"; prints outputs
  std::string entry = argv[1];
  std::vector<unsigned char> params = unhex(argv[2]);
  int nb = argc - 3;
  std::vector<std::vector<unsigned char>> bufs(nb);
  for (int b = 0; b < nb; ++b) {
    std::string a = argv[3 + b];
    if (a.rfind("out:", 0) == 0) bufs[b].assign(atoll(a.c_str() + 4) + 1, 0xAB);
    else bufs[b] = unhex(a), bufs[b].push_back(0);
  }
  // relocations come on stdin: "offset binding" pairs
  long long off, bind;
  while (scanf("%lld %lld", &off, &bind) == 2) {
    void* p = bufs[bind].data();
    memcpy(&params[off], &p, 8);
  }
  gridDim = {3, 1, 1}; blockDim = {5, 1, 1};
  for (unsigned bx = 0; bx < gridDim.x; ++bx)
    for (unsigned tx = 0; tx < blockDim.x; ++tx) {
      blockIdx = {bx, 0, 0}; threadIdx = {tx, 0, 0};
      DISPATCH
    }
  for (int b = 0; b < nb; ++b) {
    printf("%d ", b);
    for (size_t i = 0; i + 1 < bufs[b].size(); ++i) printf("%02x", bufs[b][i]);
    printf("\n");
  }
  return 0;
}
"""

# Calls an entry point with its arguments read from the (relocated) parameter block, laid out
# as CUDA lays kernel parameters: each at the next multiple of its alignment.
CALL = r"""
#include <tuple>
#include <utility>
template <class... A, size_t... I>
void umd_call(void (*f)(A...), const unsigned char* p, std::index_sequence<I...>) {
  std::tuple<std::remove_cv_t<A>...> t;
  size_t off = 0;
  ((off = (off + alignof(std::tuple_element_t<I, std::tuple<std::remove_cv_t<A>...>>) - 1) /
          alignof(std::tuple_element_t<I, std::tuple<std::remove_cv_t<A>...>>) *
          alignof(std::tuple_element_t<I, std::tuple<std::remove_cv_t<A>...>>),
    memcpy((void*)&std::get<I>(t), p + off, sizeof(std::get<I>(t))),
    off += sizeof(std::get<I>(t))), ...);
  std::apply(f, t);
}
template <class... A>
void umd_call(void (*f)(A...), const unsigned char* p) {
  umd_call(f, p, std::index_sequence_for<A...>{});
}
"""


def build(cu_path, workdir):
    src = open(cu_path).read()
    src = re.sub(r"__device__ __forceinline__ float umd_h2f.*?\n}\n", "", src, flags=re.S)
    src = re.sub(r"__device__ __forceinline__ umd_half umd_f2h.*?\n}\n", "", src, flags=re.S)
    src = src.replace("typedef unsigned short umd_bf16;\n", "typedef unsigned short umd_bf16;\n" + HOST_F16, 1)
    name = os.path.basename(cu_path)[:-3]
    lines = [f'if (entry == "{fn}") umd_call({fn}, params.data());'
             for fn in re.findall(r'extern "C" __global__ void (\w+)\(', src)]
    code = SHIM + CALL + src + MAIN.replace("DISPATCH", "\n      else ".join(lines))
    cpp = os.path.join(workdir, name + ".cpp")
    exe = os.path.join(workdir, name)
    open(cpp, "w").write(code)
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-o", exe, cpp], check=True)
    return exe


def decode(dt, b):
    fmt = {"f32": "f", "f64": "d", "i64": "q", "i32": "i", "i8": "b", "u8": "B"}
    if dt in fmt:
        size = struct.calcsize(fmt[dt])
        return list(struct.unpack("<%d%s" % (len(b) // size, fmt[dt]), b))
    vals = struct.unpack("<%dH" % (len(b) // 2), b)
    if dt == "bf16":
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in vals]
    return [struct.unpack("<e", struct.pack("<H", v))[0] for v in vals]


TOL = {"f32": 1e-5, "f64": 1e-12, "f16": 2e-3, "bf16": 1.6e-2, "i64": 0, "i32": 0, "i8": 0, "u8": 0}


def main():
    cu_dir, vec_dir = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="cuda-emu-")
    exes = {os.path.basename(p)[:-3]: build(p, work) for p in glob.glob(os.path.join(cu_dir, "*.cu"))}
    failed = 0
    cases = sorted(glob.glob(os.path.join(vec_dir, "*.case")))
    for path in cases:
        c = {"reloc": [], "input": {}, "output": {}}
        for line in open(path):
            k, rest = line.rstrip("\n").split(" ", 1)
            if k in ("module", "entry", "params"):
                c[k] = rest
            elif k == "reloc":
                c["reloc"].append(rest)
            elif k == "input":
                b, h = rest.split(" ")
                c["input"][int(b)] = h
            else:
                b, dt, h = (rest.split(" ") + [""])[:3]
                c["output"][int(b)] = (dt, h)
        nb = len(c["input"]) + len(c["output"])
        args = [c["input"][b] if b in c["input"] else "out:%d" % (len(c["output"][b][1]) // 2) for b in range(nb)]
        r = subprocess.run([exes[c["module"]], c["entry"], c["params"]] + args,
                           input="\n".join(c["reloc"]), capture_output=True, text=True, check=True)
        got = {int(l.split(" ")[0]): (l.split(" ") + [""])[1] for l in r.stdout.splitlines()}
        bad = []
        for b, (dt, h) in c["output"].items():
            want, have = decode(dt, bytes.fromhex(h)), decode(dt, bytes.fromhex(got[b]))
            t = TOL[dt] * (8 if c["entry"].startswith(("conv", "deform")) else 1)
            for i, (w, g) in enumerate(zip(want, have)):
                if not ((w != w and g != g) or abs(w - g) <= t * (1 + abs(w))):
                    bad.append(f"binding {b} [{i}]: cuda {g} cpu {w}")
                    break
        status = "ok  " if not bad else "FAIL"
        failed += bool(bad)
        print(status, os.path.basename(path), "; ".join(bad))
    print(f"{len(cases) - failed} of {len(cases)} cases agree")
    sys.exit(1 if failed else 0)


main()
