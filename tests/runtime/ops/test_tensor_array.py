"""``tf.TensorArray`` in graph mode: each program runs on TensorFlow's ``tf.compat.v1`` (the
oracle) and on tensorgrid, and the fetched values (forward and ``tf.gradients``) must agree;
each misuse fails at run time with the same OpError class as TensorFlow's, naming the bad
index or size. The distributed run lives in distributed/test_tensor_array_distributed.py.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [0.1, 0.2, -0.3], [1.0, -2.0, 0.4]])
W = np.array([[0.2, -0.1], [0.4, 0.3], [-0.5, 0.6]])
U = np.array([[0.7, -0.2], [0.1, 0.5]])


def rnn_loop(tf: Any) -> list[Any]:
    """The classic loop: inputs unstacked into one array, outputs written to another, stacked."""
    x = tf.placeholder(tf.float64, [4, 3])
    w = tf.Variable(W)
    u = tf.constant(U)
    inputs = tf.TensorArray(tf.float64, size=4).unstack(x)
    outputs = tf.TensorArray(tf.float64, size=4, element_shape=[2])

    def body(t: Any, h: Any, out: Any) -> Any:
        h = tf.tanh(tf.matmul(tf.expand_dims(inputs.read(t), 0), w) + tf.matmul(h, u))
        return t + 1, h, out.write(t, tf.reshape(h, [2]))

    _, h, out = tf.while_loop(lambda t, h, out: t < 4, body, [tf.constant(0), tf.zeros([1, 2], tf.float64), outputs])
    stacked = out.stack()
    loss = tf.reduce_sum(tf.square(stacked - 0.3)) + tf.reduce_sum(h)
    return [stacked, h, out.size(), *tf.gradients(loss, [x, w, u])], {x: X}


def write_read_outside_a_loop(tf: Any) -> list[Any]:
    """A chain of writes, a read twice (clear_after_read=False): the read's gradients add up."""
    x = tf.placeholder(tf.float64, [3])
    ta = tf.TensorArray(tf.float64, size=3, clear_after_read=False)
    ta = ta.write(0, x * 2.0).write(1, tf.tanh(x)).write(2, x * x)
    y = ta.read(1) * ta.read(1) + ta.read(0) * 3.0
    z = tf.reduce_sum(y) + tf.reduce_sum(ta.stack() * 0.5)
    return [y, ta.stack(), ta.size(), *tf.gradients(z, [x])], {x: X[0]}


def scatter_gather(tf: Any) -> list[Any]:
    x = tf.placeholder(tf.float64, [4, 3])
    ta = tf.TensorArray(tf.float64, size=5, element_shape=[3], clear_after_read=False).scatter([4, 0, 2, 1], x * x)
    picked = ta.gather([2, 4, 2])
    unwritten = ta.read(3)  # never written, element shape known: zeros, as TF1
    loss = tf.reduce_sum(picked * tf.constant([1.0, 2.0, 3.0], tf.float64)) + tf.reduce_sum(ta.stack())
    return [picked, unwritten, ta.stack(), *tf.gradients(loss, [x])], {x: X}


def split_concat(tf: Any) -> list[Any]:
    x = tf.placeholder(tf.float64, [4, 3])
    ta = tf.TensorArray(tf.float64, size=3, infer_shape=False, clear_after_read=False).split(x, [1, 3, 0])
    joined = ta.concat()
    middle = ta.read(1)
    loss = tf.reduce_sum(tf.exp(joined) * 0.1) + tf.reduce_sum(middle * middle)
    return [joined, middle, *tf.gradients(loss, [x])], {x: X}


def dynamic_size_loop(tf: Any) -> list[Any]:
    """A loop that grows the array while its condition holds, then stacks and reads back."""
    x = tf.placeholder(tf.float64, [])
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True)
    _, total, ta = tf.while_loop(lambda i, total, ta: total < 20.0,
                                 lambda i, total, ta: (i + 1, total + x * tf.cast(i + 1, tf.float64),
                                                       ta.write(i, total * x)),
                                 [tf.constant(0), x, ta])
    stacked = ta.stack()
    return [stacked, ta.size(), total, *tf.gradients(tf.reduce_sum(stacked), [x])], {x: 1.5}


def integers_and_nested_loops(tf: Any) -> list[Any]:
    """An int32 array (no gradient) filled by an inner loop in each outer iteration."""
    n = tf.placeholder(tf.int32, [])

    def outer(i: Any, ta: Any) -> Any:
        row = tf.while_loop(lambda j, r: j < 3, lambda j, r: (j + 1, r.write(j, i * 10 + j)),
                            [tf.constant(0), tf.TensorArray(tf.int32, size=3)])[1]
        return i + 1, ta.write(i, row.stack())

    _, ta = tf.while_loop(lambda i, ta: i < n, outer, [tf.constant(0), tf.TensorArray(tf.int32, size=n, clear_after_read=False)])
    return [ta.stack(), ta.size(), ta.concat()], {n: 3}


def nested_loops_with_gradients(tf: Any) -> list[Any]:
    """Each outer iteration fills a new array in an inner loop; gradients flow through both loops."""
    x = tf.placeholder(tf.float64, [3])

    def outer(i: Any, ta: Any) -> Any:
        inner = tf.while_loop(lambda j, a: j < 2,
                              lambda j, a: (j + 1, a.write(j, x * tf.cast(i + j + 1, tf.float64))),
                              [tf.constant(0), tf.TensorArray(tf.float64, size=2)])[1]
        return i + 1, ta.write(i, tf.reduce_sum(tf.square(inner.stack()), 0))

    _, ta = tf.while_loop(lambda i, ta: i < 3, outer, [tf.constant(0), tf.TensorArray(tf.float64, size=3)])
    stacked = ta.stack()
    return [stacked, *tf.gradients(tf.reduce_sum(tf.tanh(stacked)), [x])], {x: X[0]}


def cond_picks_a_tensor_array(tf: Any) -> list[Any]:
    """A cond whose branches write different values into one array; reads past it differentiate."""
    x = tf.placeholder(tf.float64, [3])
    flag = tf.placeholder(tf.bool, [])
    ta = tf.TensorArray(tf.float64, size=2).write(0, x * 2.0)
    ta = tf.cond(flag, lambda: ta.write(1, x * x), lambda: ta.write(1, tf.exp(x)))
    stacked = ta.stack()
    return [stacked, *tf.gradients(tf.reduce_sum(stacked * stacked), [x])], {x: X[1], flag: False}


PROGRAMS: dict[str, Callable[[Any], list[Any]]] = {
    "cond_picks_a_tensor_array": cond_picks_a_tensor_array,
    "nested_loops_with_gradients": nested_loops_with_gradients,
    "rnn_loop": rnn_loop,
    "write_read_outside_a_loop": write_read_outside_a_loop,
    "scatter_gather": scatter_gather,
    "split_concat": split_concat,
    "dynamic_size_loop": dynamic_size_loop,
    "integers_and_nested_loops": integers_and_nested_loops,
}


def run(tf: Any, program: Callable[[Any], Any]) -> list[Any]:
    graph = tf.Graph()
    with graph.as_default():
        fetches, feed = program(tf)
        with tf.Session(graph=graph) as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(fetches, feed)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_agrees_with_tensorflow(tf1: Any, name: str) -> None:
    expected = run(tf1, PROGRAMS[name])
    actual = run(tensorgrid, PROGRAMS[name])
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)
        assert np.asarray(got).dtype == np.asarray(want).dtype


def test_training_an_rnn_through_tensor_arrays_matches_tensorflow(tf1: Any) -> None:
    def train(tf: Any) -> list[Any]:
        graph = tf.Graph()
        with graph.as_default():
            fetches, feed = rnn_loop(tf)
            loss_grads = fetches[3:]
            w = graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)[0]
            step = tf.assign_sub(w, 0.1 * loss_grads[1])
            with tf.Session(graph=graph) as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(5):
                    sess.run(step, feed)
                return sess.run([w, fetches[0]], feed)  # type: ignore[no-any-return]

    for want, got in zip(train(tf1), train(tensorgrid)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _unknown(tf: Any, value: Any) -> Any:
    """``value`` with its shape hidden from the graph, so only the run can find a mismatch."""
    return tf.placeholder_with_default(np.asarray(value, dtype=np.float32), [None])


MISUSES: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "write_twice": (lambda tf: tf.TensorArray(tf.float32, 3).write(0, 1.0).write(0, 2.0).read(0),
                    "InvalidArgumentError", "Could not write to TensorArray index 0 because it has already been written to"),
    "read_past_size": (lambda tf: tf.TensorArray(tf.float32, 3).write(0, 1.0).read(tf.constant(5)),
                       "InvalidArgumentError", "Tried to read from index 5 but array size is: 3"),
    "read_past_size_dynamic": (
        lambda tf: tf.TensorArray(tf.float32, 3, dynamic_size=True).write(0, 1.0).read(tf.constant(5)),
        "InvalidArgumentError", "Tried to read from index 5 but array size is: 3"),
    "read_negative": (lambda tf: tf.TensorArray(tf.float32, 3).write(0, 1.0).read(tf.constant(-1)),
                      "InvalidArgumentError", "Tried to read from index -1 but array size is: 3"),
    "write_past_size": (lambda tf: tf.TensorArray(tf.float32, 3).write(tf.constant(3), 1.0).read(0),
                        "InvalidArgumentError", "Tried to write to index 3 but array is not resizeable and size is: 3"),
    "write_negative": (lambda tf: tf.TensorArray(tf.float32, 3).write(tf.constant(-1), 1.0).read(0),
                       "InvalidArgumentError", "Tried to write to index -1 but array is not resizeable and size is: 3"),
    "unstack_size_mismatch": (lambda tf: tf.TensorArray(tf.float32, 2).unstack(_unknown(tf, [1.0, 2.0, 3.0])).stack(),
                              "InvalidArgumentError", "Max scatter index must be < array size (2 vs. 2)"),
    "scatter_past_size": (lambda tf: tf.TensorArray(tf.float32, 3).scatter(tf.constant([5, 0]), [1.0, 2.0]).gather([0]),
                          "InvalidArgumentError", "Max scatter index must be < array size (5 vs. 3)"),
    "inferred_shape_mismatch": (
        lambda tf: tf.TensorArray(tf.float32, 2).write(0, _unknown(tf, [1.0, 2.0])).write(
            1, _unknown(tf, [1.0, 2.0, 3.0])).stack(),
        "InvalidArgumentError", "because the value shape is [3] which is incompatible with the TensorArray's "
                                "inferred element shape: [2] (consider setting infer_shape=False)"),
    "stack_inconsistent_shapes": (
        lambda tf: tf.TensorArray(tf.float32, 2, infer_shape=False).write(0, _unknown(tf, [1.0, 2.0])).write(
            1, _unknown(tf, [1.0, 2.0, 3.0])).stack(),
        "InvalidArgumentError", "TensorArray has inconsistent shapes.  Index 0 has shape: [2] but index 1 has shape: [3]"),
    "stack_empty_of_unknown_shape": (lambda tf: tf.TensorArray(tf.float32, 0).stack(), "UnimplementedError",
                                     "TensorArray has size zero, but element shape <unknown> is not fully defined"),
    "read_twice_when_cleared": (
        lambda tf: (lambda ta: tf.stack([ta.read(0), ta.read(0)]))(tf.TensorArray(tf.float32, 2).write(0, 1.0)),
        "InvalidArgumentError", "Could not read index 0 twice because it was cleared after a previous read "
                                "(perhaps try setting clear_after_read = false?)"),
    "split_lengths_sum": (lambda tf: tf.TensorArray(tf.float32, 2).split(_unknown(tf, [1.0, 2.0, 3.0]), [2, 2]).read(1),
                          "InvalidArgumentError", "sum of lengths is 4 and value's shape is: [3]"),
    "split_count": (lambda tf: tf.TensorArray(tf.float32, 2).split([1.0, 2.0, 3.0], [1, 1, 1]).read(1),
                    "InvalidArgumentError", "TensorArray's size is not equal to the size of lengths (2 vs. 3)"),
}


def _failure(tf: Any, build: Callable[[Any], Any]) -> Exception:
    graph = tf.Graph()
    with graph.as_default():
        fetch = build(tf)
        with tf.Session(graph=graph) as sess:
            with pytest.raises(tf.errors.OpError) as caught:
                sess.run(fetch)
    return caught.value


@pytest.mark.parametrize("name", sorted(MISUSES))
def test_misuse_fails_as_tensorflow_does(tf1: Any, name: str) -> None:
    build, error, message = MISUSES[name]
    expected = _failure(tf1, build)
    actual = _failure(tensorgrid, build)
    assert type(expected).__name__ == type(actual).__name__ == error
    assert message in str(expected)
    assert message in str(actual)


def test_static_misuse_fails_when_the_graph_is_built() -> None:
    with tensorgrid.Graph().as_default():
        ta = tensorgrid.TensorArray(tensorgrid.float32, size=2)
        with pytest.raises(ValueError, match=r"Inconsistent shapes: saw \(3,\) but expected \(2,\)"):
            ta.write(0, [1.0, 2.0]).write(1, [1.0, 2.0, 3.0])
        with pytest.raises(TypeError, match="the value has dtype int32, but the TensorArray holds float32"):
            ta.write(0, tensorgrid.constant(1))
        with pytest.raises(ValueError, match="Size must be provided"):
            tensorgrid.TensorArray(tensorgrid.float32)
        with pytest.raises(ValueError, match="has no handle"):
            tensorgrid.TensorArray(tensorgrid.float32, handle=ta.flow)
        with pytest.raises(TypeError, match="flow must be the flow of a TensorArray"):
            tensorgrid.TensorArray(tensorgrid.float32, flow=tensorgrid.constant(0.0))


def test_a_tensor_array_rebuilt_from_its_flow_and_closed() -> None:
    with tensorgrid.Graph().as_default():
        ta = tensorgrid.TensorArray(tensorgrid.float32, size=2, tensor_array_name="kept").write(0, 3.0).write(1, 4.0)
        again = tensorgrid.TensorArray(tensorgrid.float32, flow=ta.flow)
        closed = ta.close()
        with tensorgrid.Session() as sess:
            np.testing.assert_array_equal(sess.run(again.stack()), [3.0, 4.0])
            assert sess.run(closed) is None
