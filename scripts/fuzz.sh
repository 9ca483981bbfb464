#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, nightly) of the command-buffer decoder (`cmdbuf`), the
# service's request conversion (`request`), plan validation (`plan`) and the ONNX model loader
# (`model`): each target for N
# seconds (default 20) from its seed corpus in fuzz/corpus/<target>/. New inputs go to a scratch
# corpus, not into the repository; a crash stops the run and leaves its input in
# fuzz/artifacts/<target>/ (reproduce: cargo +nightly fuzz run <target> <file>).
# Env: FUZZ_TARGET_DIR (default fuzz/target), FUZZ_SANITIZER (default none: the fuzzed code is
# safe Rust; `address` builds slower), FUZZ_TARGETS (default: all four).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
targets=${FUZZ_TARGETS:-"cmdbuf request plan model"}
target_dir=${FUZZ_TARGET_DIR:-$PWD/fuzz/target}
sanitizer=${FUZZ_SANITIZER:-none}

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
# The bundled plugins are built (by umd's build script) with the same toolchain.
rustup target add --toolchain nightly wasm32-unknown-unknown >/dev/null
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
opts=(--dev --fuzz-dir fuzz --target-dir "$target_dir" --sanitizer "$sanitizer")
cargo +nightly fuzz build "${opts[@]}"
for t in $targets; do
    echo "== fuzz $t for ${seconds}s"
    mkdir -p "$scratch/$t"
    cargo +nightly fuzz run "${opts[@]}" "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
done
