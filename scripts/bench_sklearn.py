"""Trained scikit-learn models on umd's CPU device against onnxruntime's CPU execution provider,
same model file and inputs, in one run: `umd run-model --json` (steady-state median of
`--repeat` runs, in process) beside `InferenceSession.run` (median of as many runs).

    python scripts/bench_sklearn.py --umd target/release/umd [--repeat 50]

Prints a Markdown table (model, batch, umd ms, onnxruntime ms, ratio) for BENCHMARKS.md. Needs
numpy, onnxruntime, scikit-learn and skl2onnx (PyPI)."""

import argparse
import json
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
from skl2onnx import to_onnx
from sklearn import ensemble, linear_model, neural_network, svm
from sklearn.datasets import make_classification

warnings.filterwarnings("ignore")


def models():
    x, y = make_classification(n_samples=2000, n_features=20, n_informative=10, n_classes=3,
                               random_state=0)
    x = x.astype(np.float32)
    yield "LogisticRegression", linear_model.LogisticRegression(max_iter=500).fit(x, y), x
    yield "RandomForest (100 trees, depth 8)", ensemble.RandomForestClassifier(
        n_estimators=100, max_depth=8, random_state=0).fit(x, y), x
    yield "GradientBoosting (100 trees)", ensemble.GradientBoostingClassifier(
        n_estimators=100, max_depth=3, random_state=0).fit(x[:600], y[:600]), x
    yield "SVC (RBF, probabilities)", svm.SVC(probability=True, random_state=0).fit(
        x[:600], y[:600]), x
    yield "MLPClassifier (64, 64)", neural_network.MLPClassifier(
        hidden_layer_sizes=(64, 64), max_iter=200, random_state=0).fit(x, y), x


def umd_ms(umd, model_path, x, repeat, tmp):
    np.save(tmp / "x.npy", x)
    r = subprocess.run([umd, "run-model", str(model_path), "-i", f"X={tmp / 'x.npy'}",
                        "--repeat", str(repeat), "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"umd run-model failed: {r.stderr.strip()}")
    return json.loads(r.stdout)["steady_s"] * 1e3


def ort_ms(model_path, x, repeat):
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    sess.run(None, {"X": x})
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {"X": x})
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--umd", default="target/release/umd")
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    print("| model | batch | umd ms | onnxruntime ms | umd / onnxruntime |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, est, x in models():
            onx = to_onnx(est, x[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                          options={id(est): {"zipmap": False}})
            path = tmp / "m.onnx"
            path.write_bytes(onx.SerializeToString())
            for batch in (1, 1000):
                xb = np.ascontiguousarray(x[:batch])
                u = umd_ms(args.umd, path, xb, args.repeat, tmp)
                o = ort_ms(path, xb, args.repeat)
                print(f"| {name} | {batch} | {u:.3f} | {o:.3f} | {u / o:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
