#!/usr/bin/env python3
"""Compile CUDA C files with NVRTC (PyPI nvidia-cuda-nvrtc 13.0) for one or more architectures,
without a GPU. Prints one line per (file, arch) and exits non-zero if any fails.

    python scripts/nvrtc_check.py --arch sm_80 --arch sm_90 DIR_OR_FILES...
"""
import argparse
import ctypes
import glob
import os
import sys


def load_nvrtc():
    import nvidia  # namespace package from nvidia-cuda-nvrtc
    for base in nvidia.__path__:
        for pat in ("cu13/lib/libnvrtc.so*", "cuda_nvrtc/lib/libnvrtc.so*"):
            for lib in sorted(glob.glob(os.path.join(base, pat))):
                if "builtins" in lib or "alt" in lib:
                    continue
                # the builtins library must be findable by the loader
                d = os.path.dirname(lib)
                for b in glob.glob(os.path.join(d, "libnvrtc-builtins.so*")):
                    ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                return ctypes.CDLL(lib)
    raise SystemExit("libnvrtc not found: pip install 'nvidia-cuda-nvrtc==13.0.*'")


def compile_one(nvrtc, src, name, arch, options):
    prog = ctypes.c_void_p()
    r = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None)
    if r != 0:
        return False, f"nvrtcCreateProgram: {r}"
    opts = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in options]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return r == 0, log.value.decode(errors="replace").strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", action="append", default=[])
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    arches = a.arch or ["sm_80", "sm_90"]
    files = []
    for p in a.paths:
        files += sorted(glob.glob(os.path.join(p, "*.cu"))) if os.path.isdir(p) else [p]
    nvrtc = load_nvrtc()
    failed = 0
    for f in files:
        src = open(f).read()
        for arch in arches:
            ok, log = compile_one(nvrtc, src, os.path.basename(f), arch, a.option)
            print(f"{'ok  ' if ok else 'FAIL'} {f} {arch}")
            if not ok:
                failed += 1
                print(log[:4000])
    print(f"{len(files) * len(arches) - failed} compiled, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
