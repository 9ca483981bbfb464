#!/usr/bin/env bash
# The whole test suite: every Rust test (unit, integration, doc) and the Python client's tests
# against a real `umd serve`. Creates clients/python/.venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
cargo build -p umd

venv=clients/python/.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q grpcio grpcio-tools numpy pytest
PYTHON="$venv/bin/python" clients/python/generate.sh
UMD_BIN="$PWD/target/debug/umd" "$venv/bin/python" -m pytest -q clients/python/tests
