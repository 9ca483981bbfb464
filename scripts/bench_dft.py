#!/usr/bin/env python3
"""DFT on the CPU device against numpy and onnxruntime in the same run: f32[16, n, 2] forward and
inverse along axis 1, for a length with prime factors 2 only (1024, 4096) and a prime one (1021).
umd: `umd run-model --repeat R --json` (steady-state median of R); numpy `np.fft.fft`/`ifft` of
complex64 and onnxruntime's CPU provider: the median of R calls. Each output is also checked
against numpy (complex128) before it is timed. Prints a Markdown table for BENCHMARKS.md.

Usage: scripts/bench_dft.py UMD_BIN [--repeat R] [--lengths 1024,1021,4096]"""

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def model(n, inverse, batch=16):
    node = h.make_node("DFT", ["x", "", "axis"], ["y"], inverse=inverse)
    axis = nh.from_array(np.array(1, dtype=np.int64), "axis")
    g = h.make_graph([node], "dft", [h.make_tensor_value_info("x", T.FLOAT, [batch, n, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [axis])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 20)])


def median_ms(f, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("umd")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--lengths", default="1024,1021,4096")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print("| transform | umd CPU device | numpy | onnxruntime | umd / numpy | umd / onnxruntime |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in map(int, a.lengths.split(",")):
        for inv in (0, 1):
            path = tmp / f"dft{n}_{inv}.onnx"
            onnx.save(model(n, inv), path)
            x = np.random.default_rng(n).standard_normal((16, n, 2)).astype(np.float32)
            np.save(tmp / "x.npy", x)
            r = subprocess.run([a.umd, "run-model", str(path), "-i", f"x={tmp / 'x.npy'}",
                                "--repeat", str(a.repeat), "--json", "--out", str(tmp / "out")],
                               capture_output=True, text=True, check=True)
            umd_ms = json.loads(r.stdout)["steady_s"] * 1e3
            c = x[..., 0] + 1j * x[..., 1]
            fn = np.fft.ifft if inv else np.fft.fft
            y = np.load(tmp / "out" / "y.npy")
            want = fn(c.astype(np.complex128), axis=1)
            err = np.abs(y[..., 0] + 1j * y[..., 1] - want).max() / np.abs(want).max()
            assert err < 1e-6, f"n {n} inverse {inv}: relative error {err}"
            c64 = c.astype(np.complex64)
            np_ms = median_ms(lambda: fn(c64, axis=1), a.repeat)
            s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            ort_ms = median_ms(lambda: s.run(None, {"x": x}), a.repeat)
            what = "inverse" if inv else "forward"
            print(f"| {what} f32[16,{n},2] | {umd_ms:.3f} ms | {np_ms:.3f} ms | {ort_ms:.3f} ms "
                  f"| {umd_ms / np_ms:.1f}× | {umd_ms / ort_ms:.2f}× |")


if __name__ == "__main__":
    main()
