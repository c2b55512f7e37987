"""Generated code of the wire protocol (protos/tensorgrid/v1/*.proto); do not edit.

Regenerate with ``hack/gen-protos.sh`` after changing a .proto file and commit the
result; tests/repo/test_protos_fresh.py fails while these modules are stale. Streaming
methods carry raw tensor frames: use tensorgrid.distributed.rpc.transport to serve and
call them rather than the generated stubs, which would copy payloads through protobuf.
"""
