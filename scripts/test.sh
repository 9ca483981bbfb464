#!/usr/bin/env bash
# The whole test suite: every Rust test (unit, integration, doc), the Python client's tests
# against a real `umd serve`, and the ONNX conformance run. Creates clients/python/.venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

# Also builds target/debug/umd (host/tests/cli.rs is an integration test of the `umd` package):
# the binary the Python tests and the conformance run use. A separate `cargo build -p umd` would
# resolve the dependencies' features without the test crates' and rebuild them (~5 min in CI).
cargo test --workspace
umd="${CARGO_TARGET_DIR:-$PWD/target}/debug/umd"
[ -x "$umd" ] || { echo "FAIL: cargo test did not build $umd"; exit 1; }

venv=clients/python/.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# ml_dtypes (onnx's dependency) < 0.7: 0.7 turned out-of-range float -> int4/int2 conversions
# into 0, which changes the expected data onnx 1.23's generators build for the sub-byte Cast
# tests (ONNX's Cast wraps them); pinned so the reference is the one onnx was released with.
# scikit-learn and skl2onnx: real trained models (tests/test_sklearn.py).
"$venv/bin/pip" install -q grpcio grpcio-tools numpy pytest onnx onnxruntime 'ml_dtypes<0.7' \
    scikit-learn skl2onnx
PYTHON="$venv/bin/python" clients/python/generate.sh
UMD_BIN="$umd" "$venv/bin/python" -m pytest -q -rs clients/python/tests

# The official ONNX backend node tests against `umd serve` (writes CONFORMANCE.md). Fails when
# fewer than 96 % of the node tests of served op types pass (100 % today: see CONFORMANCE.md).
"$venv/bin/python" scripts/conformance.py --umd "$umd" --min-pass-rate 0.96
