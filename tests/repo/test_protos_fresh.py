"""The committed generated code of the wire protocol matches protos/tensorgrid/v1/*.proto,
and the protocol's DataType numbers are the runtime's dtype enums."""

from __future__ import annotations

import filecmp
import os
import pathlib
import subprocess
import sys


from tensorgrid.framework import dtypes
from tensorgrid.v1 import tensor_pb2

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMITTED = REPO / "runtime" / "tensorgrid" / "v1"


def test_generated_code_is_fresh(tmp_path: pathlib.Path) -> None:
    from grpc_tools import grpc_version
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(["bash", str(REPO / "hack" / "gen-protos.sh"), str(tmp_path)], check=True, env=env,
                   capture_output=True, text=True)
    fresh = tmp_path / "tensorgrid" / "v1"
    fresh_files = sorted(p.name for p in fresh.iterdir() if p.is_file())
    committed_files = sorted(p.name for p in COMMITTED.iterdir() if p.is_file())
    _, mismatched, errors = filecmp.cmpfiles(fresh, COMMITTED, fresh_files, shallow=False)
    problems = []
    if fresh_files != committed_files:
        problems.append(f"files differ: generated {fresh_files}, committed {committed_files}")
    if mismatched or errors:
        problems.append(f"contents differ: {sorted(mismatched + errors)}")
    assert not problems, (
        "runtime/tensorgrid/v1 is stale: run hack/gen-protos.sh and commit the result "
        f"(generated here with grpcio-tools {grpc_version.VERSION}; the committed code records the "
        f"version it was made with in GRPC_GENERATED_VERSION). " + "; ".join(problems)
    )


def test_data_type_numbers_are_the_runtime_dtype_enums() -> None:
    wire = {number: name for name, number in tensor_pb2.DataType.items() if number != tensor_pb2.DT_INVALID}
    for number, name in wire.items():
        dtype = dtypes.as_dtype(number)
        assert dtype.enum == number, (name, dtype)
        assert name.endswith("_REF") == dtype.is_ref_dtype, (name, dtype)
    bases = {id(v): v for v in vars(dtypes).values() if isinstance(v, dtypes.DType) and not v.is_ref_dtype}
    for base in bases.values():
        assert base.enum in wire, f"dtype {base.name} (enum {base.enum}) is missing from tensor.proto's DataType"
        assert base.enum + 100 in wire, f"dtype {base.name}_ref is missing from tensor.proto's DataType"
