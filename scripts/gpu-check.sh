#!/usr/bin/env bash
# The checks to run on a lent GPU machine. There is no package registry there: this uses a
# prebuilt binary, built beforehand with `cargo build --release -p umd --features cuda`
# (override with UMD_BIN). Writes everything to $OUT/gpu-check.txt (or ./gpu-check.txt) and
# exits non-zero when any step fails.
#
#   1. `umd devices`                      the driver, NVRTC and GPUs as umd sees them
#   2. `umd demo --device cuda:0`         MLP forward pass on the GPU, checked against plain Rust
#                                         (kernels compiled by NVRTC into a fresh kernel cache)
#   3. the same demo again                kernels now come from the on-disk kernel cache
#   4. `umd --device cuda:0 check`        every op of every plugin on the GPU against the CPU
#                                         (random shapes and dtypes), then the DESIGN §6 figures;
#                                         report in $OUT/check/check.txt and check.json
set -uo pipefail
cd "$(dirname "$0")/.."

umd=${UMD_BIN:-target/release/umd}
report=${OUT:-.}/gpu-check.txt
mkdir -p "$(dirname "$report")"
: >"$report"
failed=0

log() { echo "$*" | tee -a "$report"; }

step() {
    log "\$ $*"
    "$@" 2>&1 | tee -a "$report"
    local rc=${PIPESTATUS[0]}
    log "(exit $rc)"
    log ""
    [ "$rc" -eq 0 ] || failed=1
}

if [ ! -x "$umd" ]; then
    log "FAIL: no $umd (build it first: cargo build --release -p umd --features cuda)"
    exit 1
fi
if command -v nvidia-smi >/dev/null; then
    step nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
fi

# A fresh kernel cache, so the first demo compiles and the second reads the disk.
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export XDG_CACHE_HOME=$cache

step "$umd" devices
if "$umd" --help | grep -qE '^  demo '; then
    step env UMD_LOG=umd=debug "$umd" demo --device cuda:0
    step env UMD_LOG=umd=debug "$umd" demo --device cuda:0
    log "kernel cache: $(find "$cache" -name '*.ptx' | wc -l) PTX file(s)"
fi
if "$umd" --help | grep -qE '^  check '; then
    checkdir=${OUT:-.}/check
    step timeout 300 "$umd" --device cuda:0 check --out "$checkdir"
    [ -f "$checkdir/check.json" ] && log "check report: $checkdir/check.txt, $checkdir/check.json"
fi

if [ "$failed" -eq 0 ]; then log "gpu-check: PASS"; else log "gpu-check: FAIL"; fi
exit "$failed"
