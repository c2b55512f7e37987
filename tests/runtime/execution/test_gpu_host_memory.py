"""Shapes stay on the host of a GPU task, so a training step never waits for the device.

Reading a device value on the host (a shape for Reshape, a label range to check) waits for
every kernel queued before it: the GPU then idles while Python prepares the next kernels.
As TensorFlow keeps int32 shape arithmetic in host memory on a GPU, tensorgrid makes Shape,
Size and Rank on the host, runs ops whose tensors are all int32 there, and gives kernels the
inputs they read as ints (``register_kernel(host_inputs=...)``) where they are. Checked on
the strict cupy stand-in (``strict_gpu``), whose ``COUNTERS`` count every copy between host
and device. Measured on an H200 (bench/gpu.py, docs/limits.md "GPU tasks").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf

pytestmark = pytest.mark.timeout(120)


def _mlp_train_op(batch: int) -> tuple[Any, Any, Any, Any]:
    x = tf.placeholder(tf.float32, [None, 32])
    y = tf.placeholder(tf.int64, [None])
    layer = x
    for i, units in enumerate((16, 16, 4)):
        w = tf.get_variable(f"w{i}", [int(layer.shape[1]), units],
                            initializer=tf.truncated_normal_initializer(stddev=0.1, seed=i + 1))
        b = tf.get_variable(f"b{i}", [units], initializer=tf.zeros_initializer())
        layer = tf.matmul(layer, w) + b
        if units != 4:
            layer = tf.nn.relu(layer)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=layer))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return x, y, loss, train


def test_a_training_step_on_the_gpu_reads_nothing_back_from_the_device(strict_gpu: Any) -> None:
    x, y, loss, train = _mlp_train_op(8)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((8, 32)).astype(np.float32)
    labels = rng.integers(0, 4, 8)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: images, y: labels})
        for _ in range(2):
            sess.run(train, {x: images, y: labels})
        strict_gpu.COUNTERS.reset()
        for _ in range(5):
            sess.run(train, {x: images, y: labels})
        # Before: 10 reads back per step (8 shapes, the labels' min and max).
        assert strict_gpu.COUNTERS.device_to_host == 0
        # The two feeds, and the element count of the mean's gradient (an int32 made on the
        # host, cast to float32 on the device).
        assert strict_gpu.COUNTERS.host_to_device <= 5 * 4
        assert sess.run(loss, {x: images, y: labels}) < first


def test_shapes_of_device_tensors_are_host_values_and_int32_arithmetic_runs_on_the_host(strict_gpu: Any) -> None:
    x = tf.placeholder(tf.float32, [None, 6])
    doubled = tf.exp(x) * 2.0
    rows = tf.shape(doubled)[0]
    reshaped = tf.reshape(doubled, tf.stack([rows * 3, 2]))
    total = tf.reduce_sum(reshaped * tf.cast(tf.size(doubled), tf.float32))
    feed = np.zeros((4, 6), np.float32)
    with tf.Session() as sess:
        sess.run(total, {x: feed})
        strict_gpu.COUNTERS.reset()
        value = sess.run([total, tf.shape(doubled), tf.rank(doubled)], {x: feed})
    assert value[0] == pytest.approx(2.0 * 24 * 24)
    np.testing.assert_array_equal(value[1], [4, 6])
    assert value[2] == 2
    assert strict_gpu.COUNTERS.device_to_host == 1  # the fetched total; the shapes were never on the device


def test_fed_labels_out_of_range_fail_on_the_gpu_as_on_the_cpu(strict_gpu: Any) -> None:
    logits = tf.placeholder(tf.float32, [2, 3])
    labels = tf.placeholder(tf.int32, [2])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"label value of 3 .* valid range of \[0, 3\)"):
            sess.run(loss, {logits: np.zeros((2, 3), np.float32), labels: [0, 3]})


def test_labels_made_on_the_gpu_out_of_range_give_nan_rows_as_tensorflows_gpu_kernel(strict_gpu: Any) -> None:
    logits = tf.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    # A float computation cast to ints: the labels are made on the device, never read back.
    labels = tf.cast(tf.constant([2.0, 7.0, -1.0]) * 1.0, tf.int64)
    loss, = tf.gradients(tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), [logits])
    values = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    with tf.Session() as sess:
        strict_gpu.COUNTERS.reset()
        per_row, gradient = sess.run([values, loss])
    expected = -np.log(np.exp(3.0) / np.exp([1.0, 2.0, 3.0]).sum())
    assert per_row[0] == pytest.approx(expected, rel=1e-6)
    assert np.isnan(per_row[1]) and np.isnan(per_row[2])
    assert np.isfinite(gradient[0]).all() and np.isnan(gradient[1]).all() and np.isnan(gradient[2]).all()


def test_receive_buffers_of_a_task_with_a_gpu_are_pinned(strict_gpu: Any) -> None:
    # Received tensors go on to the device: from pinned memory that copy ran at 53 GB/s on an
    # H200, from pageable memory at 3.7 (bench/gpu.py --parts copies).
    from tensorgrid.distributed.rpc.transport import buffers
    from tensorgrid.kernels import backend as backend_lib

    pool = buffers.BufferPool(64 << 20)
    before_any_gpu_op = pool.empty(np.dtype(np.float32), (1 << 18,))
    assert strict_gpu.COUNTERS.pinned_allocations == 0
    backend_lib.for_device("GPU", 0)
    received = pool.empty(np.dtype(np.float32), (1 << 17, 3))
    assert strict_gpu.COUNTERS.pinned_allocations == 1 and strict_gpu._is_pinned(received)
    del received
    again = pool.empty(np.dtype(np.float32), (1 << 17, 3))  # reused, not pinned again
    assert strict_gpu.COUNTERS.pinned_allocations == 1 and strict_gpu._is_pinned(again)
    assert not strict_gpu._is_pinned(before_any_gpu_op)
