"""FIFOQueue against TensorFlow 2.21's ``tf.compat.v1`` (the oracle): named components
(dicts in, dicts out), ``is_closed``, ``dequeue_up_to``, the shape check of an element
whose shape is only known when it is enqueued, and a ``shared_name`` queue defined again
differently. Each program runs on both libraries and must give the same values and errors.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TensorFlow's TF1 API (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def error_of(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the class is the result
        return type(e).__name__
    return "ok"


def test_a_queue_with_names_takes_and_gives_dicts(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(5, [lib.int32, lib.float32], shapes=[(), (2,)], names=["label", "image"])
        enqueue = queue.enqueue({"label": 3, "image": [1.0, 2.0]})
        enqueue_many = queue.enqueue_many({"label": [4, 5], "image": [[3.0, 4.0], [5.0, 6.0]]})
        one = queue.dequeue()
        two = queue.dequeue_many(2)
        assert sorted(one) == ["image", "label"] and sorted(two) == ["image", "label"]
        assert two["image"].shape.as_list() == [2, 2]
        with lib.Session() as sess:
            sess.run([enqueue])
            sess.run(enqueue_many)
            first = sess.run(one)
            assert first["label"] == 3
            np.testing.assert_array_equal(first["image"], [1.0, 2.0])
            rest = sess.run(two)
            np.testing.assert_array_equal(rest["label"], [4, 5])


def test_a_queue_with_names_refuses_other_keys_and_lists(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(5, [lib.int32, lib.float32], shapes=[(), ()], names=["a", "b"])
        with pytest.raises(ValueError):
            queue.enqueue({"a": 1})
        with pytest.raises(ValueError):
            queue.enqueue({"a": 1, "c": 2.0})
        with pytest.raises(ValueError):
            queue.enqueue([1, 2.0])


def test_is_closed(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(5, lib.int32, shapes=())
        is_closed, close = queue.is_closed(), queue.close()
        assert is_closed.dtype == lib.bool and is_closed.shape.as_list() == []
        with lib.Session() as sess:
            assert not sess.run(is_closed)
            sess.run(close)
            assert sess.run(is_closed)


def test_dequeue_up_to_gives_what_is_left_once_closed(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(10, lib.int32, shapes=(2,))
        enqueue_many = queue.enqueue_many([[[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]]])
        up_to = queue.dequeue_up_to(3)
        assert up_to.shape.as_list() == [None, 2]
        with lib.Session() as sess:
            sess.run(enqueue_many)
            np.testing.assert_array_equal(sess.run(up_to), [[1, 1], [2, 2], [3, 3]])
            sess.run(queue.close())
            np.testing.assert_array_equal(sess.run(up_to), [[4, 4], [5, 5]])
            assert error_of(lambda: sess.run(up_to)) == "OutOfRangeError"


def test_dequeue_up_to_waits_for_n_while_the_queue_is_open(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(10, lib.int32, shapes=())
        enqueue = queue.enqueue_many([[1]])
        up_to = queue.dequeue_up_to(2)
        with lib.Session(config=lib.ConfigProto(operation_timeout_in_ms=300)) as sess:
            sess.run(enqueue)
            assert error_of(lambda: sess.run(up_to)) == "DeadlineExceededError"


def test_an_element_of_the_wrong_shape_is_refused_when_enqueued(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(5, lib.int32, shapes=[(2,)])
        value = lib.placeholder(lib.int32, None)
        enqueue, enqueue_many, size = queue.enqueue(value), queue.enqueue_many(value), queue.size()
        with lib.Session() as sess:
            assert error_of(lambda: sess.run(enqueue, {value: [1, 2, 3]})) == "InvalidArgumentError"
            assert error_of(lambda: sess.run(enqueue_many, {value: [[1, 2, 3]]})) == "InvalidArgumentError"
            sess.run(enqueue, {value: [1, 2]})
            assert sess.run(size) == 1


def test_an_element_of_another_dtype_is_refused_when_the_graph_is_built(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(5, lib.int32, shapes=())
        with pytest.raises((TypeError, ValueError)):
            queue.enqueue(lib.constant(1.5))


@pytest.mark.parametrize("other", [
    {"capacity": 6, "dtypes": "int32", "shapes": ()},
    {"capacity": 5, "dtypes": "float32", "shapes": ()},
    {"capacity": 5, "dtypes": "int32", "shapes": (2,)},
])
def test_a_shared_queue_defined_again_differently_fails(lib: Any, other: dict[str, Any]) -> None:
    with lib.Graph().as_default():
        first = lib.FIFOQueue(5, lib.int32, shapes=(), shared_name="shared", name="first")
        second = lib.FIFOQueue(other["capacity"], lib.as_dtype(other["dtypes"]), shapes=other["shapes"],
                               shared_name="shared", name="second")
        with lib.Session() as sess:
            sess.run(first.size())
            assert error_of(lambda: sess.run(second.size())) == "InvalidArgumentError"


def test_a_shared_queue_defined_again_alike_is_the_same_queue(lib: Any) -> None:
    with lib.Graph().as_default():
        first = lib.FIFOQueue(5, lib.int32, shapes=(), shared_name="shared", name="first")
        second = lib.FIFOQueue(5, lib.int32, shapes=(), shared_name="shared", name="second")
        with lib.Session() as sess:
            sess.run(first.enqueue(9))
            assert sess.run(second.dequeue()) == 9
