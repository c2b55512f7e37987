"""``tf.train.Server`` and ``tf.train.ClusterSpec`` shapes against TensorFlow 2.21's
``tf.compat.v1`` (the oracle): a second server on a port in use fails to start, a server
on port 0 listens on a free port named by its target (``grpc://<host in the spec>:<port>``),
``as_cluster_def()`` and ``server_def`` are protobuf messages with TensorFlow's field names,
``str(ClusterSpec)`` sorts jobs and shows an empty job as ``{}``, and
``TFConfigClusterResolver().rpc_layer`` is unset unless given.
"""

from __future__ import annotations

import json
import socket
from typing import Any, Iterator

import pytest

import tensorgrid
from tensorgrid.distributed.rpc import ports


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TensorFlow's TF1 API (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.fixture
def servers(lib: Any) -> Iterator[list[Any]]:
    """Servers a test starts; tensorgrid's are stopped after it."""
    started: list[Any] = []
    yield started
    if lib is tensorgrid:
        for server in started:
            server.stop()


def test_a_second_server_on_a_port_in_use_fails_to_start(lib: Any, servers: list[Any]) -> None:
    address = f"localhost:{ports.free_ports(1)[0]}"
    servers.append(lib.train.Server({"local": [address]}))
    with pytest.raises(Exception) as failure:
        servers.append(lib.train.Server({"local": [address]}))
    assert isinstance(failure.value, lib.errors.UnknownError)
    assert "Could not start gRPC server" in str(failure.value)
    if lib is tensorgrid:
        assert f"cannot listen on port {address.rpartition(':')[2]}" in str(failure.value)
    with lib.Graph().as_default():
        # the first server still answers on its port
        assert lib.Session(servers[0].target).run(lib.constant(3)) == 3


def test_a_server_on_port_0_listens_on_a_free_port_named_by_its_target(lib: Any, servers: list[Any]) -> None:
    servers.append(lib.train.Server({"local": ["127.0.0.1:0"]}))
    target = servers[0].target
    host, _, port = target[len("grpc://"):].rpartition(":")
    assert target.startswith("grpc://") and host == "127.0.0.1" and int(port) > 0
    with socket.create_connection((host, int(port)), timeout=5):
        pass
    with lib.Graph().as_default():
        assert lib.Session(target).run(lib.constant(4)) == 4


def test_the_target_names_the_host_of_the_cluster_spec(lib: Any, servers: list[Any]) -> None:
    port = ports.free_ports(1)[0]
    servers.append(lib.train.Server({"local": [f"127.0.0.1:{port}"]}))
    assert servers[0].target == f"grpc://127.0.0.1:{port}"


def test_server_def_is_a_server_def_message(lib: Any, servers: list[Any]) -> None:
    address = f"localhost:{ports.free_ports(1)[0]}"
    servers.append(lib.train.Server({"ps": [address], "worker": ["localhost:1"]}, job_name="ps", task_index=0))
    server_def = servers[0].server_def
    assert type(server_def).__name__ == "ServerDef"
    assert (server_def.job_name, server_def.task_index, server_def.protocol) == ("ps", 0, "grpc")
    assert [job.name for job in server_def.cluster.job] == ["ps", "worker"]
    assert dict(server_def.cluster.job[0].tasks) == {0: address}


def test_a_server_starts_from_its_server_def() -> None:
    first = tensorgrid.train.Server({"local": ["localhost:0"]})
    second = None
    try:
        server_def = first.server_def
        server_def.port = ports.free_ports(1)[0]
        second = tensorgrid.train.Server(server_def)
        assert second.port == server_def.port and second.job_name == "local"
    finally:
        for server in (first, second):
            if server is not None:
                server.stop()


CLUSTER = {"worker": ["w0:1", "w1:1"], "ps": ["p:1"], "empty": []}


def test_as_cluster_def_is_a_cluster_def_message(lib: Any) -> None:
    cluster_def = lib.train.ClusterSpec(CLUSTER).as_cluster_def()
    assert type(cluster_def).__name__ == "ClusterDef"
    assert [(job.name, dict(job.tasks)) for job in cluster_def.job] == [
        ("empty", {}), ("ps", {0: "p:1"}), ("worker", {0: "w0:1", 1: "w1:1"})]
    assert lib.train.ClusterSpec(cluster_def).as_dict() == {"empty": {}, "ps": ["p:1"], "worker": ["w0:1", "w1:1"]}


def test_cluster_spec_text_sorts_jobs_and_shows_an_empty_job_as_a_dict(lib: Any) -> None:
    spec = lib.train.ClusterSpec(CLUSTER)
    assert str(spec) == "ClusterSpec({'empty': {}, 'ps': ['p:1'], 'worker': ['w0:1', 'w1:1']})"
    assert spec.as_dict() == {"worker": ["w0:1", "w1:1"], "ps": ["p:1"], "empty": {}}
    assert str(lib.train.ClusterSpec({"worker": {1: "w1:1", 3: "w3:1"}})) == \
        "ClusterSpec({'worker': {1: 'w1:1', 3: 'w3:1'}})"


def test_tf_config_resolver_rpc_layer_is_unset_unless_given(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = {"worker": ["w:1"], "ps": ["p:1"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    resolvers = lib.distribute.cluster_resolver
    assert resolvers.TFConfigClusterResolver().rpc_layer is None
    assert resolvers.TFConfigClusterResolver().master() == "w:1"
    assert resolvers.TFConfigClusterResolver(rpc_layer="grpc").rpc_layer == "grpc"
    assert resolvers.TFConfigClusterResolver(rpc_layer="grpc").master() == "grpc://w:1"
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0}}))
    assert resolvers.TFConfigClusterResolver(rpc_layer="grpc").master() == ""  # the only task: in-process
