#!/usr/bin/env python3
"""Load / first run / steady run of whole models: `umd run-model` (CPU device) against
onnxruntime's CPU execution provider, same model and inputs, same run. Prints a Markdown table
for BENCHMARKS.md. Usage: scripts/bench_models.py [UMD_BIN] (default target/release/umd)."""

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))
import test_models as tm  # noqa: E402  (the models the tests build)
import model_timing  # noqa: E402

UMD = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "release" / "umd")
REPEAT = 200


def ort_times(path, feeds):
    return model_timing.ort_times(path, feeds, REPEAT)


def umd_times(path, feeds):
    return model_timing.umd_run_model(UMD, path, feeds, REPEAT, extra=["--profile"])


def main():
    rng = np.random.default_rng(0)
    models = {
        "LeNet, batch 2": (tm.lenet(), {"x": rng.standard_normal((2, 1, 28, 28)).astype(np.float32)}),
        "encoder layer d=32, 2×9": (tm.encoder_layer(), {
            "x": rng.standard_normal((2, 9, 32)).astype(np.float32),
            "mask": np.ones((2, 9), np.int64)}),
    }
    print("| model | nodes (folded/views/launched) | umd load / first / steady | onnxruntime load / first / steady | ratio steady | overhead per node | peak / sum of intermediates |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (model, feeds) in models.items():
            path = Path(tmp) / "m.onnx"
            onnx.save(model, path)
            u = umd_times(path, feeds)
            # umd's load in the CLI excludes the host start; ort's session creation includes
            # its graph optimisation, umd's compile happens in its first run.
            ol, of, os_ = ort_times(path, feeds)
            per_node = (u["steady_s"] - u["profile_sum_s"]) / max(u["launched"], 1)
            ms = lambda s: f"{s * 1e3:.3f}"  # noqa: E731
            print(f"| {name} | {u['nodes']} ({u['folded']}/{u['views']}/{u['launched']}) | "
                  f"{ms(u['load_s'])} / {ms(u['first_s'])} / {ms(u['steady_s'])} ms | "
                  f"{ms(ol)} / {ms(of)} / {ms(os_)} ms | {u['steady_s'] / os_:.1f}× | "
                  f"{per_node * 1e6:+.1f} µs | {u['peak_bytes']} / {u['intermediate_bytes']} B |")


if __name__ == "__main__":
    main()
