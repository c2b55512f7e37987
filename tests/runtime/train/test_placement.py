"""replica_device_setter places ops exactly as TensorFlow does (round-robin, greedy, explicit devices)."""

import numpy as np
import pytest

import tensorgrid as tf



def build_model(lib, setter_kwargs):
    """A two-layer model with a global step and an explicit device override, in either library."""
    graph = lib.Graph()
    with graph.as_default():
        with lib.device(lib.train.replica_device_setter(**setter_kwargs)):
            step = lib.Variable(0, name="global_step", trainable=False)
            x = lib.placeholder(lib.float32, [None, 4], name="x")
            w1 = lib.Variable(np.zeros((4, 8), np.float32), name="w1")
            b1 = lib.Variable(np.zeros((8,), np.float32), name="b1")
            h = lib.nn.relu(lib.matmul(x, w1) + b1, name="h")
            with lib.device("/job:ps/task:1"):
                w2 = lib.Variable(np.zeros((8, 2), np.float32), name="w2")
            with lib.device("/job:worker/task:7"):
                b2 = lib.Variable(np.zeros((2,), np.float32), name="b2")
            logits = lib.matmul(h, w2) + b2
            loss = lib.reduce_mean(logits, name="loss")
            lib.assign_add(step, 1, name="inc")
            del loss
    return {op.name: op.device for op in graph.get_operations()}


@pytest.mark.parametrize("setter_kwargs", [
    {"ps_tasks": 2},
    {"ps_tasks": 3, "worker_device": "/job:worker/task:1"},
    {"cluster": {"ps": ["a:1", "b:1"], "worker": ["c:1"]}, "worker_device": "/job:worker/task:0/cpu:0"},
    {"ps_tasks": 2, "ps_device": "/job:param", "worker_device": "/job:worker"},
    {"ps_tasks": 2, "ps_ops": ["VariableV2", "Identity"]},
    {"ps_tasks": 2, "merge_devices": False},
])
def test_same_assignment_as_tensorflow(tf1, setter_kwargs):
    ours = build_model(tf, setter_kwargs)
    theirs = build_model(tf1, setter_kwargs)
    # TensorFlow names the add of a `+` 'add', tensorgrid too; compare every op both graphs have.
    common = sorted(set(ours) & set(theirs))
    assert len(common) >= 20
    assert {name: ours[name] for name in common} == {name: theirs[name] for name in common}


def test_round_robin_order_and_explicit_devices_win():
    with tf.Graph().as_default() as g:
        with tf.device(tf.train.replica_device_setter(ps_tasks=3)):
            vs = [tf.Variable(1.0, name=f"v{i}") for i in range(4)]
            with tf.device("/job:ps/task:2"):
                pinned = tf.Variable(1.0, name="pinned")
            y = vs[0] * 2.0
    assert [v.device for v in vs] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2", "/job:ps/task:0"]
    # An explicit task still consumes no round-robin slot when its job matches; TF does the same.
    assert pinned.device == "/job:ps/task:2"
    assert y.device == "/job:worker"
    assert g.get_operation_by_name("v1/read").device == "/job:ps/task:1"


def test_greedy_strategy_balances_bytes():
    strategy = tf.train.GreedyLoadBalancingStrategy(2, tf.train.byte_size_load_fn)
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
            big = tf.Variable(np.zeros((1000,), np.float32), name="big")      # 4000 bytes -> ps0
            small1 = tf.Variable(np.zeros((10,), np.float32), name="small1")  # ps1 (load 0)
            small2 = tf.Variable(np.zeros((10,), np.float64), name="small2")  # ps1 (40 < 4000)
            mid = tf.Variable(np.zeros((500,), np.float32), name="mid")       # ps1 (120 < 4000)
            last = tf.Variable(np.zeros((1,), np.float32), name="last")       # ps1 (2120 < 4000)
    assert [v.device for v in (big, small1, small2, mid, last)] == [
        "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:1", "/job:ps/task:1", "/job:ps/task:1"]


def test_no_ps_tasks_means_no_device_function():
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    assert tf.train.replica_device_setter(cluster={"worker": ["a:1"]}) is None


def test_conflicting_colocation_is_an_error_naming_both():
    from tensorgrid.distributed import cluster as cluster_lib
    from tensorgrid.distributed import partition
    from tensorgrid.framework import device as device_lib

    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0, name="v")
        with tf.colocate_with(v.op), tf.device("/job:worker/task:0"):
            c = tf.identity(v.value(), name="c")
        c.op._set_device("/job:worker/task:0")
    cluster = cluster_lib.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot colocate 'c'.*conflicting device specs"):
        partition.place(g.get_operations(), device_lib.DeviceSpec("worker", 0, 0), cluster)
