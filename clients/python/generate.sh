#!/usr/bin/env bash
# Regenerates umd_client/umd_pb2.py and umd_pb2_grpc.py from the project's proto/umd.proto.
# Needs grpcio-tools. The proto is staged as umd_client/umd.proto so the generated modules
# import each other as `umd_client.*`; its package (`umd`) and so the wire names are unchanged.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/umd_client"
cp "$here/../../proto/umd.proto" "$stage/umd_client/umd.proto"
"$python" -m grpc_tools.protoc -I "$stage" --python_out="$here" --grpc_python_out="$here" \
    "$stage/umd_client/umd.proto"
