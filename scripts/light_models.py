#!/usr/bin/env python3
"""The 9 "light" ImageNet architectures shipped in the `onnx` wheel
(`onnx/backend/test/data/light`, weights as ConstantOfShape nodes), each run with
`umd run-model` on the CPU device and with onnxruntime (CPU execution provider) on the same
random inputs; prints a Markdown table (status, max abs / rel error, umd and ort times) for
MODELS.md. Too slow for the pytest suite in a debug build (full-size networks).

    UMD_BIN=target/release/umd python scripts/light_models.py [--timeout S] [NAME...]

With `--repeat N` (N > 1) it prints a benchmark table instead (BENCHMARKS.md): each model's
load, first run and steady run (median of N) for umd (`run-model --json`, in process) and for
onnxruntime (session creation, first `run`, median of N `run`s), and the steady ratio.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model_timing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64}
RTOL, ATOL = 1e-3, 1e-4


def feeds_of(model, rng):
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(NP[t.elem_type])
    return feeds


def safe_name(name: str) -> str:
    """The file name `umd run-model` gives an output (`safe_name` in host/src/cli/run_model.rs)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name[:128])


def first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "no message").replace("|", "/")[:200]


def bench_one(umd, path: Path, repeat: int, timeout: float):
    """(umd load, first, steady), (ort load, first, steady) in seconds."""
    model = onnx.load(path)
    feeds = feeds_of(model, np.random.default_rng(0))
    u = model_timing.umd_run_model(umd, path, feeds, repeat, timeout=timeout)
    ort_load, ort_first, ort_steady = model_timing.ort_times(path, feeds, repeat)
    return (u["load_s"], u["first_s"], u["steady_s"]), (ort_load, ort_first, ort_steady)


def run_one(umd, path: Path, timeout: float):
    model = onnx.load(path)
    feeds = feeds_of(model, np.random.default_rng(0))
    with tempfile.TemporaryDirectory() as tmp:
        args = [umd, "run-model", str(path), "--out", tmp, "--repeat", "1", "--json"]
        for name, arr in feeds.items():
            f = Path(tmp) / f"in_{len(args)}.npy"
            np.save(f, arr)
            args += ["-i", f"{name}={f}"]
        t0 = time.perf_counter()
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", f"over {timeout:.0f} s", None, None
        umd_s = time.perf_counter() - t0
        if r.returncode != 0:
            return "missing", first_line(r.stderr), umd_s, None
        figs = json.loads(r.stdout)
        got = {o["name"]: np.load(Path(tmp) / f"{safe_name(o['name'])}.npy") for o in figs["outputs"]}
    t0 = time.perf_counter()
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
    ort_s = time.perf_counter() - t0
    worst = []
    for name, w in want.items():
        g = got.get(name)
        if g is None or g.shape != w.shape:
            return "wrong", f"output `{name}`: shape {None if g is None else g.shape} != {w.shape}", umd_s, ort_s
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst.append(float(err.max()) / max(float(np.abs(w).max()), 1e-30))
        if not np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True):
            return "wrong", f"output `{name}`: max abs error {err.max():.3g}", umd_s, ort_s
    return "pass", f"max error / max output {max(worst):.2g}", umd_s, ort_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    umd = os.environ.get("UMD_BIN", str(ROOT / "target" / "release" / "umd"))
    paths = sorted(LIGHT.glob("*.onnx"))
    if a.names:
        paths = [p for p in paths if any(n in p.stem for n in a.names)]
    if a.repeat > 1:
        print("| model | umd load / first / steady (ms) | onnxruntime load / first / steady (ms) "
              "| umd / onnxruntime, steady |")
        print("| --- | --- | --- | --- |")
        for p in paths:
            u, o = bench_one(umd, p, a.repeat, a.timeout)
            ms = " / ".join
            print(f"| `{p.stem}` | {ms(f'{v * 1e3:.0f}' for v in u)} | "
                  f"{ms(f'{v * 1e3:.0f}' for v in o)} | {u[2] / o[2]:.1f}× |", flush=True)
        return 0
    print("| model | status | detail | umd run-model (s, incl. load) | onnxruntime (s) |")
    print("| --- | --- | --- | --- | --- |")
    bad = 0
    for p in paths:
        status, detail, us, os_ = run_one(umd, p, a.timeout)
        bad += status != "pass"
        f = lambda v: "" if v is None else f"{v:.1f}"  # noqa: E731
        print(f"| `light/{p.stem}` | {status} | {detail} | {f(us)} | {f(os_)} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
