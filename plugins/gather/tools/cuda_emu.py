#!/usr/bin/env python3
"""Runs the plugin's CUDA kernels on the host, without a GPU, and compares them with the CPU
kernels. Every module dumped by `UMD_DUMP_CUDA` is compiled as C++ (g++, with a shim for the
CUDA built-ins and sequential atomics; the PTX f16 conversions replaced by _Float16 ones). The
parameter layout of each entry point is derived from its C signature (after preprocessing), so
a packer that disagrees with a kernel's signature fails here (the block size must match too).
Each launch dumped by `UMD_DUMP_VECTORS` (src/tests/emu.rs) then runs on a small grid (3 blocks
of 5 threads, exercising the grid-stride loops) over write-only buffers filled with 0xAB.

    rm -rf /tmp/cu /tmp/vec
    UMD_DUMP_CUDA=/tmp/cu UMD_DUMP_VECTORS=/tmp/vec cargo test -p umd-plugin-gather
    python3 plugins/gather/tools/cuda_emu.py /tmp/cu /tmp/vec
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
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <map>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
struct umd_dim3 { unsigned x, y, z; };
static umd_dim3 blockIdx, threadIdx, gridDim, blockDim;
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
template <class T> static T atomicCAS(T* p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; }
template <class T> static T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
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
template <class P> static P take(const std::vector<unsigned char>& params, size_t& off) {
  P v; size_t a = alignof(P) < 8 ? alignof(P) : 8;
  off = (off + a - 1) / a * a;
  memcpy(&v, &params[off], sizeof(P)); off += sizeof(P);
  return v;
}
int main(int argc, char** argv) {
  std::ifstream in(argv[1]);
  std::string line, entry;
  std::vector<unsigned char> params;
  std::map<int, std::vector<unsigned char>> bufs;
  std::vector<std::pair<long, int>> relocs;
  std::vector<int> wanted;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string k; ls >> k;
    if (k == "entry") ls >> entry;
    else if (k == "params") { std::string h; ls >> h; params = unhex(h); }
    else if (k == "reloc") { long o; int b; ls >> o >> b; relocs.push_back({o, b}); }
    else if (k == "buf") { int b; std::string h; ls >> b >> h; bufs[b] = unhex(h); bufs[b].push_back(0xCD); }
    else if (k == "out") { int b; size_t n; ls >> b >> n; bufs[b].assign(n + 1, 0xAB); }
    else if (k == "want") { int b; ls >> b; wanted.push_back(b); }
  }
  for (auto& r : relocs) { void* p = bufs[r.second].data(); memcpy(&params[r.first], &p, 8); }
  gridDim = {3, 1, 1}; blockDim = {5, 1, 1};
  bool found = false;
  DISPATCH
  if (!found) { printf("ERROR no entry %s\n", entry.c_str()); return 2; }
  for (int b : wanted) {
    auto& v = bufs[b];
    if (v.back() != 0xCD && v.back() != 0xAB) { printf("ERROR binding %d written past its end\n", b); return 3; }
    printf("%d ", b);
    for (size_t i = 0; i + 1 < v.size(); ++i) printf("%02x", v[i]);
    printf("\n");
  }
  return 0;
}
"""

SIG = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)


def param_decls(args):
    """(type, name) of each parameter of a C signature."""
    out = []
    for a in args.split(","):
        a = " ".join(a.replace("__restrict__", "").split())
        m = re.match(r"(.*?)(\w+)$", a)
        out.append((m.group(1).strip(), m.group(2)))
    return out


def build(cu_path, workdir):
    src = open(cu_path).read()
    src = re.sub(r"__device__ __forceinline__ float umd_h2f.*?\n}\n", "", src, flags=re.S)
    src = re.sub(r"__device__ __forceinline__ umd_half umd_f2h.*?\n}\n", "", src, flags=re.S)
    src = src.replace("typedef unsigned short umd_bf16;\n", "typedef unsigned short umd_bf16;\n" + HOST_F16, 1)
    src = src.replace('asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(v));',
                      "{ _Float16 hh = (_Float16)v; memcpy(&h, &hh, 2); }")
    assert "asm(" not in src, f"{cu_path}: inline PTX left"
    name = os.path.basename(cu_path)[:-3]
    pre = subprocess.run(["g++", "-E", "-P", "-x", "c++", "-"], input=src, capture_output=True, text=True,
                         check=True).stdout
    lines = []
    for fn, args in SIG.findall(pre):
        decls = param_decls(args)
        body = ["size_t off = 0;"]
        for i, (ty, _) in enumerate(decls):
            body.append(f"{ty} p{i} = take<{ty}>(params, off);")
        call = ", ".join(f"p{i}" for i in range(len(decls)))
        body.append('if (off != params.size()) { printf("ERROR parameter block is %zu bytes, '
                    f'{fn} takes %zu\\n", params.size(), off); return 4; }}')
        body.append("for (unsigned bx = 0; bx < gridDim.x; ++bx) for (unsigned tx = 0; tx < blockDim.x; ++tx) "
                    f"{{ blockIdx = {{bx, 0, 0}}; threadIdx = {{tx, 0, 0}}; {fn}({call}); }}")
        lines.append(f'if (entry == "{fn}") {{ found = true; ' + " ".join(body) + " }")
    code = SHIM + src + MAIN.replace("DISPATCH", "\n  ".join(lines))
    cpp = os.path.join(workdir, name + ".cpp")
    exe = os.path.join(workdir, name)
    open(cpp, "w").write(code)
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-fwrapv", "-o", exe, cpp], check=True)
    return exe


def floats(name, b):
    if name in ("f32", "f64"):
        f = "f" if name == "f32" else "d"
        n = struct.calcsize(f)
        return list(struct.unpack("<%d%s" % (len(b) // n, f), b))
    vals = struct.unpack("<%dH" % (len(b) // 2), b)
    if name == "bf16":
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in vals]
    return [struct.unpack("<e", struct.pack("<H", v))[0] for v in vals]


TOL = {"f32": 1e-5, "f64": 1e-12, "f16": 1e-3, "bf16": 1e-2}


def agree(module, entry, want, got):
    if want == got:
        return None
    # float reductions of Scatter* apply duplicate updates in another order on the GPU
    dt = module.rsplit("_", 1)[1]
    if module.startswith("gather_scatter_") and dt in TOL:
        for i, (w, g) in enumerate(zip(floats(dt, want), floats(dt, got))):
            if not ((w != w and g != g) or abs(w - g) <= TOL[dt] * (1 + abs(w))):
                return f"element {i}: cuda {g} cpu {w}"
        return None
    i = next(i for i in range(len(want)) if want[i] != got[i])
    return f"byte {i}: cuda {got[i]:02x} cpu {want[i]:02x}"


def main():
    cu_dir, vec_dir = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="gather-emu-")
    exes = {os.path.basename(p)[:-3]: build(p, work) for p in sorted(glob.glob(os.path.join(cu_dir, "*.cu")))}
    failed = 0
    cases = sorted(glob.glob(os.path.join(vec_dir, "*.case")))
    for path in cases:
        want, module, entry = {}, None, None
        for line in open(path):
            w = line.split()
            if w[0] == "module":
                module = w[1]
            elif w[0] == "entry":
                entry = w[1]
            elif w[0] == "want":
                want[int(w[1])] = bytes.fromhex(w[2] if len(w) > 2 else "")
        r = subprocess.run([exes[module], path], capture_output=True, text=True)
        bad = []
        if r.returncode != 0:
            bad.append(r.stdout.strip() or f"exit {r.returncode}")
        else:
            got = {int(l.split()[0]): bytes.fromhex((l.split() + [""])[1]) for l in r.stdout.splitlines()}
            for b, h in want.items():
                e = agree(module, entry, h, got[b])
                if e:
                    bad.append(f"binding {b} {e}")
        failed += bool(bad)
        if bad:
            print("FAIL", os.path.basename(path), entry, "; ".join(bad))
    print(f"{len(cases) - failed} of {len(cases)} launches agree ({len(exes)} modules)")
    sys.exit(1 if failed else 0)


main()
