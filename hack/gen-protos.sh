#!/usr/bin/env bash
# gen-protos.sh: generate the Python code of the wire protocol.
#
# Compiles protos/tensorgrid/v1/*.proto with grpc_tools.protoc into
# runtime/tensorgrid/v1/ (messages *_pb2.py with *_pb2.pyi stubs, services
# *_pb2_grpc.py), importable as tensorgrid.v1.<name>_pb2. The output is
# committed; tests/repo/test_protos_fresh.py fails when it is stale, so run this
# after every .proto change and commit the result.
#
# Usage: hack/gen-protos.sh [OUT_DIR]
#   OUT_DIR  where the tensorgrid/v1/ package is written (default: runtime/)
# Environment: PYTHON, the interpreter with grpcio-tools installed (default:
# .venv/bin/python when it exists, else python3). The generated code records
# the grpcio-tools and protobuf versions, so use the pinned dev versions.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-$REPO_ROOT/runtime}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

PKG_DIR="$OUT_DIR/tensorgrid/v1"
mkdir -p "$PKG_DIR"
# Start clean so a deleted .proto leaves no stale module behind.
rm -f "$PKG_DIR"/*_pb2.py "$PKG_DIR"/*_pb2.pyi "$PKG_DIR"/*_pb2_grpc.py

cd "$REPO_ROOT"
# Sorted, so the order protoc sees (and any output that depends on it) is stable.
mapfile -t PROTOS < <(LC_ALL=C ls protos/tensorgrid/v1/*.proto | sed 's|^protos/||')
"$PYTHON" -m grpc_tools.protoc -I protos \
  --python_out="$OUT_DIR" --pyi_out="$OUT_DIR" --grpc_python_out="$OUT_DIR" \
  "${PROTOS[@]}"

cat > "$PKG_DIR/__init__.py" <<'PY'
"""Generated code of the wire protocol (protos/tensorgrid/v1/*.proto); do not edit.

Regenerate with ``hack/gen-protos.sh`` after changing a .proto file and commit the
result; tests/repo/test_protos_fresh.py fails while these modules are stale. Streaming
methods carry raw tensor frames: use tensorgrid.distributed.rpc.transport to serve and
call them rather than the generated stubs, which would copy payloads through protobuf.
"""
PY
echo "generated ${#PROTOS[@]} proto files into $PKG_DIR" >&2
