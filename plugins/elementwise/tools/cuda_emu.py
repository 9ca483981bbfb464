#!/usr/bin/env python3
"""Runs the elementwise plugin's CUDA kernels on the host, without a GPU.

Each CUDA module dumped by src/tests/emu.rs is compiled as C++ with g++ (a shim for the CUDA
built-ins; the prelude's PTX f16 conversions replaced by _Float16 ones). For every kernel the
script parses its signature and generates a struct of its parameters (the C ABI lays it out as
CUDA lays out the parameter block) and a runner that checks the block's size against it, copies
the block in and runs a 3x5 "grid" of threads in turn. Then each case of cases.txt runs: its
buffers are made, its launches run in order on them (relocations patched to host addresses),
and every output is compared with the CPU kernels' (element-wise, NaN equal to NaN).

    UMD_DUMP_VECTORS=/tmp/ew CARGO_TARGET_DIR=... cargo test -p umd-plugin-elementwise dump_vectors
    python3 plugins/elementwise/tools/cuda_emu.py /tmp/ew
"""
import collections
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

SHIM = r"""
#include <math.h>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
struct umd_dim3 { unsigned x, y, z; };
static umd_dim3 blockIdx, threadIdx, gridDim, blockDim;
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
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
[[noreturn]] static void die(const std::string& m) { fprintf(stderr, "%s\n", m.c_str()); exit(3); }
int main() {
  std::map<long, std::vector<unsigned char>> bufs;
  std::string cmd;
  while (std::cin >> cmd) {
    if (cmd == "buf") {
      long id; size_t size; std::string h;
      std::cin >> id >> size >> h;
      auto& v = bufs[id];
      if (h == "-") v.assign(size, 0xAB); else v = unhex(h.substr(1));
      if (v.size() != size) die("buffer size mismatch");
    } else if (cmd == "launch") {
      std::string entry, ph, rel;
      std::cin >> entry >> ph >> rel;
      std::vector<unsigned char> params = unhex(ph.substr(1));
      size_t pos = 0;
      while (pos < rel.size() && rel != "-") {
        size_t comma = rel.find(',', pos); if (comma == std::string::npos) comma = rel.size();
        std::string item = rel.substr(pos, comma - pos);
        size_t colon = item.find(':');
        long off = atol(item.substr(0, colon).c_str()), b = atol(item.substr(colon + 1).c_str());
        if (!bufs.count(b)) die("relocation names an unknown buffer");
        void* p = bufs[b].data();
        if (off + 8 > (long)params.size()) die("relocation outside the block");
        memcpy(&params[off], &p, 8);
        pos = comma + 1;
      }
      auto it = RUNNERS.find(entry);
      if (it == RUNNERS.end()) die("no entry point " + entry);
      it->second(params);
    } else if (cmd == "dump") {
      long id; std::cin >> id;
      printf("%ld x", id);
      for (unsigned char c : bufs[id]) printf("%02x", c);
      printf("\n");
    } else if (cmd == "reset") {
      bufs.clear();
    } else die("unknown command " + cmd);
  }
  return 0;
}
"""

SIG = re.compile(r'extern "C" __global__ void (\w+)\(([^)]*)\)')


def runner(name, params):
    fields = [p.strip() for p in params.split(",")]
    names = [re.split(r"[ *]", f)[-1] for f in fields]
    last = names[-1]
    struct_ = "struct P_%s { %s; };" % (name, "; ".join(fields))
    return f"""
{struct_}
static void R_{name}(const std::vector<unsigned char>& b) {{
  P_{name} p; memset(&p, 0, sizeof p);
  size_t want = offsetof(P_{name}, {last}) + sizeof(p.{last});
  if (b.size() != want) die("{name}: parameter block of " + std::to_string(b.size()) + " bytes, the kernel's parameters take " + std::to_string(want));
  memcpy(&p, b.data(), b.size());
  gridDim = {{3, 1, 1}}; blockDim = {{5, 1, 1}};
  for (unsigned bx = 0; bx < 3; ++bx) for (unsigned tx = 0; tx < 5; ++tx) {{
    blockIdx = {{bx, 0, 0}}; threadIdx = {{tx, 0, 0}};
    {name}({", ".join("p." + n for n in names)});
  }}
}}
"""


def build(cu_path, workdir):
    src = open(cu_path).read()
    src = re.sub(r"__device__ __forceinline__ float umd_h2f.*?\n}\n", "", src, flags=re.S)
    src = re.sub(r"__device__ __forceinline__ umd_half umd_f2h.*?\n}\n", "", src, flags=re.S)
    src = src.replace("typedef unsigned short umd_bf16;\n", "typedef unsigned short umd_bf16;\n" + HOST_F16, 1)
    sigs = SIG.findall(src)
    runners = "".join(runner(n, p) for n, p in sigs)
    table = "static std::map<std::string, void (*)(const std::vector<unsigned char>&)> RUNNERS = {%s};\n" % (
        ", ".join('{"%s", R_%s}' % (n, n) for n, _ in sigs))
    main = MAIN.split("int main()")
    code = SHIM + src + main[0] + runners + table + "int main()" + main[1]
    name = os.path.basename(cu_path)[:-3]
    cpp, exe = os.path.join(workdir, name + ".cpp"), os.path.join(workdir, name)
    open(cpp, "w").write(code)
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-o", exe, cpp], check=True)
    return exe


def decode(dt, h):
    b = bytes.fromhex(h)
    if dt == "f32":
        return list(struct.unpack(f"<{len(b)//4}f", b))
    if dt == "f64":
        return list(struct.unpack(f"<{len(b)//8}d", b))
    if dt == "f16":
        return list(struct.unpack(f"<{len(b)//2}e", b))
    if dt == "bf16":
        return [struct.unpack("<f", b"\0\0" + b[i:i + 2])[0] for i in range(0, len(b), 2)]
    return list(b)  # integers and bools compare as bytes


def same(dt, got, want):
    g, w = decode(dt, got), decode(dt, want)
    if len(g) != len(w):
        return False
    return all(a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)) for a, b in zip(g, w))


def parse(path):
    cases, cur = [], None
    for line in open(path):
        t = line.split(" ")
        t[-1] = t[-1].rstrip("\n")
        if t[0] == "case":
            cur = {"name": line[5:].strip(), "bufs": [], "launches": [], "expect": []}
        elif t[0] == "buf":
            cur["bufs"].append(t[1:])
        elif t[0] == "launch":
            cur["launches"].append(t[1:])
        elif t[0] == "expect":
            cur["expect"].append(t[1:])
        elif t[0] == "end":
            cases.append(cur)
    return cases


def main():
    d = sys.argv[1]
    cases = parse(os.path.join(d, "cases.txt"))
    by_module = collections.defaultdict(list)
    for c in cases:
        mods = {l[0] for l in c["launches"]}
        assert len(mods) == 1, f"{c['name']}: launches span modules {mods}"
        by_module[mods.pop()].append(c)
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for mod, cs in sorted(by_module.items()):
            exe = build(os.path.join(d, mod + ".cu"), work)
            script = []
            for c in cs:
                script.append("reset")
                script += ["buf " + " ".join(b) for b in c["bufs"]]
                script += ["launch " + " ".join(l[1:]) for l in c["launches"]]
                script += [f"dump {e[0]}" for e in c["expect"]]
            r = subprocess.run([exe], input="\n".join(script) + "\n", capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {mod}: {r.stderr.strip()}")
                failed += len(cs)
                continue
            dumps = iter(r.stdout.split("\n"))
            bad = 0
            for c in cs:
                for binding, dt, want in c["expect"]:
                    got = next(dumps).split(" ")[1]
                    if not same(dt, got[1:], want[1:]):
                        bad += 1
                        print(f"FAIL {mod} {c['name']}: output {binding}\n  gpu {decode(dt, got[1:])}\n  cpu {decode(dt, want[1:])}")
            failed += bad
            print(f"{'ok  ' if not bad else 'FAIL'} {mod}: {len(cs)} cases, {bad} mismatched")
    print(f"{len(cases)} cases, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
