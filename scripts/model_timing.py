"""Timing shared by the model benchmarks (`bench_models.py`, `light_models.py --repeat`): one
model run by `umd run-model --json` and by onnxruntime's CPU execution provider on the same
inputs."""

import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort


def umd_run_model(umd, path, feeds, repeat, extra=(), timeout=None):
    """`umd run-model PATH --json --repeat N` with `feeds` as `.npy` inputs: its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [str(umd), "run-model", str(path), "--json", "--repeat", str(repeat), *extra]
        for i, (name, arr) in enumerate(feeds.items()):
            f = Path(tmp) / f"in_{i}.npy"
            np.save(f, arr)
            args += ["-i", f"{name}={f}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True)
        return json.loads(r.stdout)


def ort_times(path, feeds, repeat):
    """onnxruntime (CPU provider): session creation, first run and the median of `repeat`
    runs, in seconds."""
    t0 = time.perf_counter()
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    s.run(None, feeds)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        s.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return load, first, float(np.median(times))
