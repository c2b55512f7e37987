"""A server answers malformed or hostile requests with a clear gRPC status and keeps serving."""

import grpc
import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import clients
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.v1 import master_pb2, tensor_pb2, worker_pb2

pytestmark = [pytest.mark.timeout(120), pytest.mark.gpu_node]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("bad-input"), {"ps": 1, "worker": 1}) as c:
        yield c


@pytest.fixture
def raw(cluster):
    """Raw-bytes callables on the worker task, bypassing every client-side check (with the
    test run's certificates: a member of the job sending bad input)."""
    channel = tls.open_channel(cluster.task("worker").address, tls.from_env(), grpc_frames.GRPC_OPTIONS)

    def call(service, method, payload, timeout=10):
        return channel.unary_unary(f"/tensorgrid.v1.{service}/{method}")(payload, timeout=timeout)

    yield call
    channel.close()


def _status(excinfo):
    return excinfo.value.code(), excinfo.value.details()


def _still_serving(cluster):
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(41.0, name="v")
        with tf.device("/job:worker/task:0"):
            y = v + 1.0
    with tf.Session(cluster.target("worker"), graph=g) as sess:
        sess.run(v.initializer)
        assert sess.run(y) == 42.0


def test_garbage_request_bytes(cluster, raw):
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "RegisterGraph", b"\xff\xff\xff\xff not a protobuf")
    code, details = _status(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed RegisterGraphRequest" in details
    _still_serving(cluster)


def test_truncated_bundle(cluster, raw):
    request = worker_pb2.RunGraphFrame(request=worker_pb2.RunGraphRequest(graph_handle="x", step_id=1))
    bundle = wire.bundle_frames([request.SerializeToString()])
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "RunGraph", bundle[:-3])
    assert _status(e)[0] == grpc.StatusCode.INVALID_ARGUMENT
    _still_serving(cluster)


def test_unknown_graph_and_session_handles(cluster, raw):
    request = worker_pb2.RunGraphFrame(request=worker_pb2.RunGraphRequest(graph_handle="no-such-graph", step_id=7))
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "RunGraph", wire.bundle_frames([request.SerializeToString()]))
    code, details = _status(e)
    assert code == grpc.StatusCode.ABORTED
    assert "no-such-graph" in details and "not registered" in details

    step = master_pb2.RunStepFrame(request=master_pb2.RunStepRequest(session_handle="no-such-session"))
    with pytest.raises(grpc.RpcError) as e:
        raw("Master", "RunStep", wire.bundle_frames([step.SerializeToString()]))
    code, details = _status(e)
    assert code == grpc.StatusCode.NOT_FOUND
    assert "no-such-session" in details
    _still_serving(cluster)


def _push(step_id, header, payload):
    first = worker_pb2.PushTensorsFrame(request=worker_pb2.PushTensorsRequest(step_id=step_id, from_task="test"))
    return wire.bundle_frames([first.SerializeToString(), wire.header_frame(header),
                                    wire.chunk_frame(payload)])


def test_tensor_bytes_that_do_not_match_the_header(cluster, raw):
    header = tensor_pb2.TensorHeader(dtype=tensor_pb2.DT_FLOAT, shape=tensor_pb2.TensorShapeProto(dim=[4]),
                                     byte_size=16, name="key")
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "PushTensors", _push(1, header, b"\0" * 12))
    code, details = _status(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "key" in details
    wrong_size = tensor_pb2.TensorHeader(dtype=tensor_pb2.DT_FLOAT, shape=tensor_pb2.TensorShapeProto(dim=[4]),
                                         byte_size=15, name="key")
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "PushTensors", _push(2, wrong_size, b"\0" * 15))
    assert _status(e)[0] == grpc.StatusCode.INVALID_ARGUMENT
    _still_serving(cluster)


def test_huge_declared_size_is_refused_before_allocating(cluster, raw):
    header = tensor_pb2.TensorHeader(dtype=tensor_pb2.DT_DOUBLE,
                                     shape=tensor_pb2.TensorShapeProto(dim=[1 << 20, 1 << 20]),
                                     byte_size=8 << 40, name="huge")
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "PushTensors", _push(3, header, b"\0" * 8))
    code, details = _status(e)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "huge" in details
    _still_serving(cluster)


def test_malformed_rendezvous_key(cluster, raw):
    request = worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key=["not;a;key"])
    with pytest.raises(grpc.RpcError) as e:
        raw("Worker", "RecvTensor", request.SerializeToString())
    code, details = _status(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "Malformed rendezvous key 'not;a;key'" in details


def test_invalid_graph_is_rejected_with_the_bad_node(cluster):
    from tensorgrid.framework import graph_def as graph_def_lib

    client = clients.WorkerClient(cluster.task("worker").address, "/job:worker/replica:0/task:0")
    bad = graph_def_lib.GraphDef(nodes=[graph_def_lib.NodeDef("y", "Identity", ["x:0"], "", {}, ["float32"], [()])])
    with pytest.raises(tf.errors.InvalidArgumentError, match="'y' has input 'x'"):
        client.register_graph("s", bad, [], ["y:0"], [])
    unknown = graph_def_lib.GraphDef(nodes=[graph_def_lib.NodeDef("z", "NoSuchOp", [], "", {}, [], [])])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Unknown op type 'NoSuchOp'"):
        client.register_graph("s", unknown, [], [], ["z"])
    client.close()
    _still_serving(cluster)


def test_stale_incarnation_is_aborted(cluster):
    client = clients.WorkerClient(cluster.task("worker").address, "/job:worker/replica:0/task:0")
    incarnation = client.incarnation_quick()
    key = f"/job:worker/replica:0/task:0/device:CPU:0;{incarnation ^ 1:016x};/job:ps/replica:0/task:0;x:0;0:0"
    with pytest.raises(tf.errors.AbortedError, match="restarted"):
        client.recv_tensor(5, key)
    client.close()


def test_fetching_a_large_tensor_through_the_master_stream(cluster):
    value = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [1024, 1024])
        with tf.device("/job:ps/task:0"):
            y = x * 2.0
    with tf.Session(cluster.target("worker"), graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: value}), value * 2.0)
