"""``tf.train.ServerDef``, ``tf.train.ClusterDef``, ``tf.train.JobDef`` built as TF1 programs build
them (Kubeflow's ``tf_smoke.py``: ``tf.train.ServerDef(cluster=cluster.as_cluster_def(), ...)``),
a ``tf.train.Server`` started from one, and ``tf.NodeDef`` as the custom device functions of TF1
tutorials test an op against it; TensorFlow 2.21's ``tf.compat.v1`` is the oracle (issue 24).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import tensorgrid
from tensorgrid.distributed.rpc import ports


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TF1 (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.fixture
def servers(lib: Any) -> Iterator[list[Any]]:
    """Servers a test starts; tensorgrid's are stopped after it (TensorFlow's cannot be)."""
    started: list[Any] = []
    yield started
    if lib is tensorgrid:
        for server in started:
            server.stop()


def fields(server_def: Any) -> tuple[Any, ...]:
    """What a program reads from a ServerDef."""
    return (server_def.job_name, server_def.task_index, server_def.protocol,
            [(job.name, dict(job.tasks)) for job in server_def.cluster.job])


def test_a_server_def_built_as_tf1_programs_build_it(lib: Any) -> None:
    cluster = lib.train.ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]})
    server_def = lib.train.ServerDef(cluster=cluster.as_cluster_def(), job_name="worker", task_index=1,
                                     protocol="grpc")
    assert isinstance(server_def, lib.train.ServerDef)
    assert fields(server_def) == ("worker", 1, "grpc", [("ps", {0: "p0:2222"}),
                                                       ("worker", {0: "w0:2222", 1: "w1:2222"})])
    assert lib.train.ServerDef.FromString(server_def.SerializeToString()) == server_def


def test_a_cluster_def_of_job_defs_makes_a_cluster_spec(lib: Any) -> None:
    cluster_def = lib.train.ClusterDef(job=[lib.train.JobDef(name="worker", tasks={0: "w0:1", 2: "w2:1"}),
                                            lib.train.JobDef(name="ps", tasks={0: "p0:1"})])
    cluster_def.job.add(name="chief").tasks[0] = "c:1"
    assert lib.train.ClusterSpec(cluster_def).as_dict() == {"worker": {0: "w0:1", 2: "w2:1"}, "ps": ["p0:1"],
                                                            "chief": ["c:1"]}


def test_a_server_starts_from_a_server_def_and_runs_a_step(lib: Any, servers: list[Any]) -> None:
    address = f"localhost:{ports.free_ports(1)[0]}"
    cluster = lib.train.ClusterSpec({"local": [address]})
    server_def = lib.train.ServerDef(cluster=cluster.as_cluster_def(), job_name="local", task_index=0,
                                     protocol="grpc")
    servers.append(lib.train.Server(server_def))
    assert servers[0].target == f"grpc://{address}"
    assert fields(servers[0].server_def) == fields(server_def)
    with lib.Graph().as_default():
        with lib.device("/job:local/task:0"):
            total = lib.add(lib.constant(2), 3)
        assert lib.Session(servers[0].target).run(total) == 5


def test_the_arguments_given_override_the_server_def_s_fields(lib: Any, servers: list[Any]) -> None:
    first, second = (f"localhost:{port}" for port in ports.free_ports(2))
    cluster = lib.train.ClusterSpec({"ps": [first, second]})
    server_def = lib.train.ServerDef(cluster=cluster.as_cluster_def(), job_name="ps", task_index=0,
                                     protocol="grpc")
    servers.append(lib.train.Server(server_def, task_index=1))
    assert servers[0].target == f"grpc://{second}"
    assert servers[0].server_def.task_index == 1


def test_a_server_def_s_session_config_is_the_server_s() -> None:
    server_def = tensorgrid.train.ServerDef(
        cluster=tensorgrid.train.ClusterSpec({"local": ["localhost:0"]}).as_cluster_def(), job_name="local",
        task_index=0, protocol="grpc")
    server_def.default_session_config.operation_timeout_in_ms = 5000
    server = tensorgrid.train.Server(server_def)
    try:
        assert server.server_def.default_session_config.operation_timeout_in_ms == 5000
    finally:
        server.stop()


def test_a_device_function_tests_ops_against_node_def(lib: Any) -> None:
    """The ``assign_to_device`` of TF1 multi-GPU and parameter-server tutorials."""
    variable_ops = ["Variable", "VariableV2", "VarHandleOp"]

    def assign_to_device(op: Any) -> str:
        node_def = op if isinstance(op, lib.NodeDef) else op.node_def
        return "/job:ps/task:0" if node_def.op in variable_ops else "/job:worker/task:0"

    with lib.Graph().as_default():
        with lib.device(assign_to_device):
            weights = lib.Variable(lib.zeros([2]), name="weights")
            doubled = lib.multiply(weights, 2.0)
        assert [weights.op.device, doubled.op.device] == ["/job:ps/task:0", "/job:worker/task:0"]
        assert isinstance(doubled.op.node_def, lib.NodeDef)
        assert (doubled.op.node_def.name, doubled.op.node_def.op) == ("Mul", "Mul")
