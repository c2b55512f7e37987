"""``tf.get_variable`` / ``tf.variable_scope`` semantics, and the initializers they use.

Names, sharing and the error messages follow TF1 exactly: programs rely on them to
build towers that share weights and to restore checkpoints by name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorgrid as tf


# ---------------------------------------------------------------- names

def test_variable_names_follow_nested_variable_scopes() -> None:
    with tf.variable_scope("outer"):
        with tf.variable_scope("inner"):
            w = tf.get_variable("w", [2, 3])
        b = tf.get_variable("b", [3])
    assert w.name == "outer/inner/w:0"
    assert w.op.name == "outer/inner/w"
    assert b.name == "outer/b:0"
    assert w.shape.as_list() == [2, 3]
    assert w.dtype.base_dtype == tf.float32


def test_variable_scope_opens_a_name_scope_for_ops() -> None:
    with tf.variable_scope("layer") as scope:
        c = tf.constant(1.0, name="c")
    assert c.op.name == "layer/c"
    assert scope.name == "layer"
    assert scope.original_name_scope == "layer/"


def test_variable_names_ignore_name_scopes() -> None:
    with tf.name_scope("ns"):
        with tf.variable_scope("vs"):
            w = tf.get_variable("w", [1])
            c = tf.constant(0.0, name="c")
    assert w.op.name == "vs/w"
    assert c.op.name == "ns/vs/c"


def test_default_name_is_made_unique() -> None:
    with tf.variable_scope(None, default_name="layer") as first:
        a = tf.get_variable("w", [1])
    with tf.variable_scope(None, default_name="layer") as second:
        b = tf.get_variable("w", [1])
    assert (first.name, second.name) == ("layer", "layer_1")
    assert (a.op.name, b.op.name) == ("layer/w", "layer_1/w")


def test_reentering_a_scope_object_keeps_variable_names_but_opens_a_new_name_scope() -> None:
    with tf.variable_scope("model") as scope:
        w = tf.get_variable("w", [1])
    with tf.variable_scope(scope, reuse=True):
        again = tf.get_variable("w", [1])
        c = tf.constant(0.0, name="c")
    assert again is w
    assert c.op.name == "model_1/c"
    with tf.variable_scope(scope):
        v = tf.get_variable("v", [1])
    assert v.op.name == "model/v"


def test_get_variable_scope_is_the_current_scope() -> None:
    assert tf.get_variable_scope().name == ""
    with tf.variable_scope("a"):
        with tf.variable_scope("b"):
            assert tf.get_variable_scope().name == "a/b"
        assert tf.get_variable_scope().name == "a"
    assert tf.get_variable_scope().name == ""


# ---------------------------------------------------------------- sharing

def test_creating_a_variable_twice_is_an_error_naming_it() -> None:
    with tf.variable_scope("foo"):
        tf.get_variable("w", [1])
    with pytest.raises(ValueError, match=r"Variable foo/w already exists, disallowed\. Did you mean to set reuse=True"):
        with tf.variable_scope("foo"):
            tf.get_variable("w", [1])


def test_reuse_true_returns_the_same_variable() -> None:
    with tf.variable_scope("foo"):
        w = tf.get_variable("w", [2])
    with tf.variable_scope("foo", reuse=True):
        assert tf.get_variable("w", [2]) is w
        assert tf.get_variable("w") is w  # the shape may be omitted when reusing


def test_reuse_true_of_a_missing_variable_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"Variable foo/w does not exist, or was not created with tf\.get_variable\(\)"):
        with tf.variable_scope("foo", reuse=True):
            tf.get_variable("w", [1])


def test_plain_variables_are_not_found_by_get_variable() -> None:
    tf.Variable(1.0, name="v")
    with pytest.raises(ValueError, match="does not exist"):
        with tf.variable_scope("", reuse=True):
            tf.get_variable("v", [])


def test_auto_reuse_creates_then_shares() -> None:
    def tower() -> tf.Variable:
        with tf.variable_scope("tower", reuse=tf.AUTO_REUSE):
            return tf.get_variable("w", [3])

    first, second = tower(), tower()
    assert first is second
    assert len(tf.global_variables()) == 1


def test_reuse_is_inherited_and_cannot_be_switched_off_inside() -> None:
    with tf.variable_scope("a"):
        with tf.variable_scope("b"):
            w = tf.get_variable("w", [1])
    with tf.variable_scope("a", reuse=True):
        with tf.variable_scope("b", reuse=False) as inner:
            assert inner.reuse is True
            assert tf.get_variable("w", [1]) is w


def test_reuse_variables_switches_the_current_scope_to_reuse() -> None:
    with tf.variable_scope("net") as scope:
        w = tf.get_variable("w", [1])
        scope.reuse_variables()
        assert tf.get_variable("w", [1]) is w


def test_reuse_without_a_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with tf.variable_scope(None, default_name="x", reuse=True):
            pass


def test_shape_mismatch_on_reuse_names_both_shapes() -> None:
    with tf.variable_scope("s"):
        tf.get_variable("w", [2, 3])
    with pytest.raises(ValueError, match=r"Trying to share variable s/w, but specified shape \(3, 2\) and found shape \(2, 3\)"):
        with tf.variable_scope("s", reuse=True):
            tf.get_variable("w", [3, 2])


def test_dtype_mismatch_on_reuse_is_an_error() -> None:
    with tf.variable_scope("s"):
        tf.get_variable("w", [1], dtype=tf.float32)
    with pytest.raises(ValueError, match="specified dtype float64 and found dtype float32"):
        with tf.variable_scope("s", reuse=True):
            tf.get_variable("w", [1], dtype=tf.float64)


# ---------------------------------------------------------------- creation arguments

def test_scope_initializer_applies_to_variables_inside(session: tf.Session) -> None:
    with tf.variable_scope("s", initializer=tf.constant_initializer(3.0)):
        w = tf.get_variable("w", [2])
        with tf.variable_scope("inner"):
            v = tf.get_variable("v", [1])
        u = tf.get_variable("u", [1], initializer=tf.ones_initializer())
    session.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(session.run(w), [3.0, 3.0])
    np.testing.assert_array_equal(session.run(v), [3.0])
    np.testing.assert_array_equal(session.run(u), [1.0])


def test_default_initializers_glorot_uniform_for_floats_zeros_for_ints(session: tf.Session) -> None:
    w = tf.get_variable("w", [40, 60])
    n = tf.get_variable("n", [3], dtype=tf.int64)
    session.run(tf.global_variables_initializer())
    values = session.run(w)
    limit = math.sqrt(6.0 / (40 + 60))
    assert np.all(np.abs(values) <= limit) and values.std() > limit / 3
    np.testing.assert_array_equal(session.run(n), [0, 0, 0])


def test_initializer_may_be_a_tensor_or_value_without_shape(session: tf.Session) -> None:
    a = tf.get_variable("a", initializer=tf.constant([1.0, 2.0]))
    b = tf.get_variable("b", initializer=np.arange(3, dtype=np.int32))
    session.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(session.run(a), [1.0, 2.0])
    assert a.shape.as_list() == [2]
    np.testing.assert_array_equal(session.run(b), [0, 1, 2])
    assert b.dtype.base_dtype == tf.int32


def test_constant_initializer_with_shape_is_an_error() -> None:
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape"):
        tf.get_variable("a", [2], initializer=tf.constant([1.0, 2.0]))


def test_initializer_dtype_must_match_explicit_dtype() -> None:
    with pytest.raises(ValueError, match="Initializer type 'float32' and explicit dtype 'int32' don't match"):
        tf.get_variable("a", initializer=tf.constant([1.0]), dtype=tf.int32)


def test_missing_shape_without_initializer_is_an_error() -> None:
    with pytest.raises(ValueError, match="did not get an initializer, so its `shape` argument must be specified"):
        tf.get_variable("a")


def test_trainable_and_collections() -> None:
    t = tf.get_variable("t", [1])
    f = tf.get_variable("f", [1], trainable=False)
    c = tf.get_variable("c", [1], collections=["mine"])
    loc = tf.get_local_variable("loc", [1])
    assert tf.trainable_variables() == [t, c]
    assert tf.global_variables() == [t, f]
    assert tf.get_collection("mine") == [c]
    assert tf.local_variables() == [loc] and not loc.trainable


def test_regularizer_loss_is_collected() -> None:
    with tf.variable_scope("s", regularizer=lambda v: tf.reduce_sum(tf.square(v))):
        w = tf.get_variable("w", [2])
        tf.get_variable("free", [2], regularizer=tf.no_regularizer)
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 1
    assert losses[0].op.name.startswith("s/w/Regularizer/")
    assert losses[0].device == w.device


def test_custom_getter_wraps_creation() -> None:
    calls = []

    def custom(getter, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(name)
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with tf.variable_scope("g", custom_getter=custom):
        w = tf.get_variable("w", [1])
    assert calls == ["g/w"]
    assert not w.trainable


def test_variable_scope_values_choose_the_graph() -> None:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(1.0)
    with tf.variable_scope("s", values=[x]):
        w = tf.get_variable("w", [1])
    assert w.graph is graph
    assert tf.get_default_graph().get_operations() == []


def test_variables_and_their_initializers_are_placed_together() -> None:
    with tf.device("/job:ps/task:1"):
        w = tf.get_variable("w", [1])
    assert w.device == "/job:ps/task:1"
    # As in TF1, the initializer computes on the variable's task (its PS), not next to the caller.
    initializer_ops = [op for op in tf.get_default_graph().get_operations() if op.name.startswith("w/Initializer/")]
    assert initializer_ops and all(op.get_attr("_class") == ["loc:@w"] for op in initializer_ops)


# ---------------------------------------------------------------- initializers

def _init_value(session: tf.Session, initializer, shape, dtype=tf.float32):  # type: ignore[no-untyped-def]
    return session.run(initializer(shape, dtype=dtype))


def test_constant_initializer_fills_and_pads_like_tf(session: tf.Session) -> None:
    np.testing.assert_array_equal(_init_value(session, tf.constant_initializer(2.5), [2, 2]), [[2.5, 2.5], [2.5, 2.5]])
    np.testing.assert_array_equal(
        _init_value(session, tf.constant_initializer([0, 1, 2, 3, 4, 5, 6, 7]), [3, 4]),
        [[0, 1, 2, 3], [4, 5, 6, 7], [7, 7, 7, 7]],
    )
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 6, but received 8"):
        tf.constant_initializer([0, 1, 2, 3, 4, 5, 6, 7])([2, 3])
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        tf.constant_initializer([1, 2], verify_shape=True)([3])


def test_zeros_and_ones_initializers_take_the_dtype(session: tf.Session) -> None:
    zeros = _init_value(session, tf.zeros_initializer(), [2], tf.int32)
    ones = _init_value(session, tf.ones_initializer(), [2, 1], tf.float64)
    assert zeros.dtype == np.int32 and zeros.tolist() == [0, 0]
    assert ones.dtype == np.float64 and ones.tolist() == [[1.0], [1.0]]


def test_seeded_random_initializers_are_reproducible_and_have_the_right_statistics(session: tf.Session) -> None:
    normal = _init_value(session, tf.random_normal_initializer(1.0, 2.0, seed=7), [200, 100])
    again = _init_value(session, tf.random_normal_initializer(1.0, 2.0, seed=7), [200, 100])
    np.testing.assert_array_equal(normal, again)
    assert abs(normal.mean() - 1.0) < 0.05 and abs(normal.std() - 2.0) < 0.05

    truncated = _init_value(session, tf.truncated_normal_initializer(0.0, 0.5, seed=1), [20000])
    assert np.abs(truncated).max() <= 1.0

    uniform = _init_value(session, tf.random_uniform_initializer(-3.0, -1.0, seed=2), [20000])
    assert uniform.min() >= -3.0 and uniform.max() < -1.0 and abs(uniform.mean() + 2.0) < 0.05


def test_variance_scaling_uses_tf_fans(session: tf.Session) -> None:
    # A 3x3 convolution from 8 to 16 channels: fan_in = 72, fan_out = 144.
    uniform = _init_value(session, tf.variance_scaling_initializer(2.0, "fan_in", "uniform", seed=3), [3, 3, 8, 16])
    assert np.abs(uniform).max() <= math.sqrt(3 * 2.0 / 72)
    normal = _init_value(session, tf.variance_scaling_initializer(1.0, "fan_out", "untruncated_normal", seed=3),
                         [3, 3, 32, 64])
    assert abs(normal.std() - math.sqrt(1.0 / (9 * 64))) < 0.01 * math.sqrt(1.0 / (9 * 64)) * 10
    truncated = _init_value(session, tf.variance_scaling_initializer(seed=4), [500, 400])
    assert abs(truncated.std() - math.sqrt(1.0 / 500)) < 0.03 * math.sqrt(1.0 / 500)
    glorot = _init_value(session, tf.glorot_normal_initializer(seed=5), [300, 500])
    assert abs(glorot.std() - math.sqrt(2.0 / 800)) < 0.03 * math.sqrt(2.0 / 800)
    with pytest.raises(ValueError, match="mode"):
        tf.variance_scaling_initializer(mode="fan_sideways")


def test_initializers_namespace() -> None:
    assert tf.initializers.zeros is tf.zeros_initializer
    assert tf.initializers.glorot_uniform is tf.glorot_uniform_initializer
    assert isinstance(tf.initializers.global_variables(), tf.Operation)
