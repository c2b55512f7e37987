"""Every gradient rule against central finite differences, in float64.

Cases cover broadcasting (gradients summed back over broadcast axes), size-0
dimensions, and unknown static dimensions (``unknown_dims=True``: the rules must
then take their dynamic-shape paths). Non-smooth ops (relu, max, max_pool, clip)
are probed at random points, away from their kinks with probability one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import numpy as np
import pytest

import tensorgrid as tf
from gradient_check import check_gradient

RNG = np.random.default_rng(4321)


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape)


def distribution(*shape: int) -> np.ndarray:
    """Rows that are probability distributions, as cross-entropy labels must be."""
    weights = positive(*shape)
    return weights / weights.sum(-1, keepdims=True)


@dataclasses.dataclass
class GradCase:
    id: str
    build: Callable[..., Any]
    inputs: tuple[np.ndarray, ...]
    wrt: Optional[tuple[int, ...]] = None
    rtol: float = 1e-5
    atol: float = 1e-7


BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((0, 3), (3,)), ((2, 0), (1, 0))]

BINARY = {
    "add": (tf.add, normal, normal),
    "subtract": (tf.subtract, normal, normal),
    "multiply": (tf.multiply, normal, normal),
    "div": (tf.div, normal, positive),
    "pow": (tf.pow, positive, normal),
    "maximum": (tf.maximum, normal, normal),
    "minimum": (tf.minimum, normal, normal),
    "squared_difference": (tf.squared_difference, normal, normal),
}

UNARY = {
    "negative": (tf.negative, normal), "square": (tf.square, normal), "sqrt": (tf.sqrt, positive),
    "rsqrt": (tf.rsqrt, positive), "exp": (tf.exp, normal), "log": (tf.log, positive), "abs": (tf.abs, normal),
    "reciprocal": (tf.reciprocal, positive), "sigmoid": (tf.sigmoid, normal), "tanh": (tf.tanh, normal),
    "relu": (tf.nn.relu, normal), "relu6": (tf.nn.relu6, lambda *s: normal(*s) * 5),
    "leaky_relu": (tf.nn.leaky_relu, normal), "identity": (tf.identity, normal),
    "l2_loss": (tf.nn.l2_loss, normal), "softmax": (tf.nn.softmax, normal), "log_softmax": (tf.nn.log_softmax, normal),
}

MATH_CASES = [
    GradCase(f"{name}-{a}-{b}", fn, (gen_a(*a), gen_b(*b)))
    for name, (fn, gen_a, gen_b) in BINARY.items()
    for a, b in BROADCAST_SHAPES
] + [
    GradCase(f"{name}-{shape}", fn, (gen(*shape),))
    for name, (fn, gen) in UNARY.items()
    for shape in ([(), (5,), (2, 3), (0, 4)] if name not in ("softmax", "log_softmax") else [(5,), (2, 3), (0, 4)])
] + [
    GradCase(f"matmul-ta{ta}-tb{tb}", lambda x, y, ta=ta, tb=tb: tf.matmul(x, y, transpose_a=ta, transpose_b=tb),
             (normal(*a), normal(*b)))
    for a, b, ta, tb in [((3, 4), (4, 2), False, False), ((4, 3), (4, 2), True, False),
                         ((3, 4), (2, 4), False, True), ((4, 3), (2, 4), True, True), ((0, 3), (3, 2), False, False)]
] + [
    GradCase("add_n", lambda a, b, c: tf.add_n([a, b, c]) * a, (normal(2, 3), normal(2, 3), normal(2, 3))),
    GradCase("operators", lambda a, b: (a + b) * a - b / 2.0 + (-a) ** 2 + 1.0 / (b * b + 1), (normal(3), normal(3))),
    GradCase("reused-input", lambda a: a * a + tf.exp(a) * a, (normal(2, 2),)),
    GradCase("cast-float64-to-float32-and-back", lambda a: tf.cast(tf.cast(a, tf.float32), tf.float64) * 0 + a,
             (normal(3),)),
    GradCase("clip_by_value", lambda x: tf.clip_by_value(x, -0.5, 0.5), (normal(3, 4),)),
    GradCase("clip_by_norm", lambda x: tf.clip_by_norm(x, 1.0), (normal(3, 4),)),
    GradCase("clip_by_global_norm", lambda a, b: tf.clip_by_global_norm([a, b], 1.0)[0], (normal(3, 2), normal(4))),
    GradCase("global_norm", lambda a, b: tf.global_norm([a, b]), (normal(3, 2), normal(4))),
]

REDUCTION_CASES = [
    GradCase(f"{fn.__name__}-axis{axis}-keep{keep}", lambda x, fn=fn, axis=axis, keep=keep: fn(x, axis, keepdims=keep),
             (gen(2, 3, 4),))
    for fn, gen in [(tf.reduce_sum, normal), (tf.reduce_mean, normal), (tf.reduce_max, normal),
                    (tf.reduce_min, normal), (tf.reduce_prod, positive)]
    for axis in [None, 1, -1, [0, 2]]
    for keep in [False, True]
] + [
    GradCase(f"{fn.__name__}-unknown-rank-axis{axis}",
             lambda x, fn=fn, axis=axis: fn(tf.placeholder_with_default(x, shape=None), axis), (normal(2, 3, 2),))
    for fn in (tf.reduce_sum, tf.reduce_mean, tf.reduce_max)
    for axis in (None, 1, [0, -1])
] + [
    GradCase("reduce_sum-empty", lambda x: tf.reduce_sum(x, 0), (normal(0, 3),)),
    GradCase("reduce_mean-empty-rows", lambda x: tf.reduce_mean(x, 1), (normal(0, 3),)),
]

ARRAY_CASES = [
    GradCase("reshape", lambda x: tf.reshape(x, [3, -1]), (normal(2, 6),)),
    GradCase("transpose-default", tf.transpose, (normal(2, 3, 4),)),
    GradCase("transpose-perm", lambda x: tf.transpose(x, [1, 2, 0]), (normal(2, 3, 4),)),
    GradCase("concat", lambda a, b, c: tf.concat([a, b, c], 1), (normal(2, 1), normal(2, 3), normal(2, 0))),
    GradCase("concat-neg-axis", lambda a, b: tf.concat([a, b], -1), (normal(2, 2, 1), normal(2, 2, 3))),
    GradCase("split", lambda x: tf.split(x, [1, 2, -1], axis=1), (normal(2, 5),)),
    GradCase("split-equal", lambda x: tf.split(x, 2)[1], (normal(4, 3),)),
    GradCase("gather", lambda x: tf.gather(x, [2, 0, 2, 2]), (normal(3, 4),)),
    GradCase("gather-2d-indices", lambda x: tf.gather(x, [[1, 1], [0, 3]]), (normal(4, 2),)),
    GradCase("gather-axis1", lambda x: tf.gather(x, [[2, 0], [2, 2], [1, 0]], axis=1), (normal(2, 3, 2),)),
    GradCase("gather-axis2", lambda x: tf.gather(x, [1, 1, 0], axis=2), (normal(2, 3, 2),)),
    GradCase("gather-empty-index", lambda x: tf.gather(x, np.zeros([0], np.int32)), (normal(3, 2),)),
    GradCase("embedding_lookup", lambda x: tf.nn.embedding_lookup(x, [[0, 4], [4, 4]]), (normal(5, 3),)),
    GradCase("unsorted_segment_sum", lambda x: tf.unsorted_segment_sum(x, [0, 2, 2, -1, 1], 3), (normal(5, 2),)),
    GradCase("expand_dims", lambda x: tf.expand_dims(x, 1), (normal(2, 3),)),
    GradCase("squeeze", lambda x: tf.squeeze(x), (normal(1, 3, 1),)),
    GradCase("stack", lambda a, b: tf.stack([a, b], axis=1), (normal(2, 3), normal(2, 3))),
    GradCase("unstack", lambda x: tf.unstack(x, axis=1), (normal(2, 3),)),
    GradCase("unstack-one-used", lambda x: tf.unstack(x)[1], (normal(3, 2),)),
    GradCase("where", lambda a, b: tf.where(a > b, a, b * 2), (normal(3, 4), normal(3, 4))),
    GradCase("where-vector", lambda a, b: tf.where(tf.constant([True, False, True]), a, b), (normal(3, 2), normal(3, 2))),
    GradCase("tile", lambda x: tf.tile(x, [2, 3]), (normal(2, 3),)),
    GradCase("tile-rank3", lambda x: tf.tile(x, [1, 2, 2]), (normal(2, 1, 3),)),
    GradCase("broadcast_to", lambda x: tf.broadcast_to(x, [4, 2, 3]), (normal(2, 1),)),
    GradCase("one_hot-then-mul", lambda x: tf.one_hot([0, 2], 3, dtype=tf.float64) * x, (normal(2, 3),)),
    GradCase("strided_slice", lambda x: tf.strided_slice(x, [0, 1], [3, 4], [2, 1]), (normal(4, 5),)),
    GradCase("slice", lambda x: tf.slice(x, [1, 0], [2, -1]), (normal(4, 3),)),
    GradCase("getitem-tensor-index", lambda x: x[tf.constant(2), 1:], (normal(4, 3),)),
] + [
    GradCase(f"getitem-{key!r}", lambda x, key=key: x[key], (normal(4, 3, 2),))
    for key in [1, -1, slice(1, None), slice(None, None, -1), slice(None, None, 2), (1, 2), (Ellipsis, 1),
                (None, 0), (slice(None), slice(None, None, -2), 1), (slice(5, 9),), (0, None, slice(1, 3))]
]

NN_CASES = [
    GradCase("softmax-axis0", lambda x: tf.nn.softmax(x, axis=0), (normal(3, 4),)),
    GradCase("log_softmax-rank3", lambda x: tf.nn.log_softmax(x), (normal(2, 2, 3),)),
    GradCase("sparse_softmax_xent", lambda x: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([0, 2, 1, 2]), logits=x), (normal(4, 3),)),
    GradCase("sparse_softmax_xent-rank3", lambda x: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([[0, 2], [1, 1]], tf.int64), logits=x), (normal(2, 2, 3),)),
    GradCase("softmax_xent_v2", lambda x, y: tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x),
             (normal(4, 3), distribution(4, 3))),
    GradCase("softmax_xent_v2-axis0", lambda x, y: tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x, axis=0),
             (normal(3, 2), distribution(2, 3).T)),
    GradCase("softmax_xent-v1-logits", lambda x, y: tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=x),
             (normal(4, 3), distribution(4, 3)), wrt=(0,)),
    GradCase("bias_add", tf.nn.bias_add, (normal(2, 3, 4), normal(4))),
    GradCase("bias_add-NCHW", lambda x, b: tf.nn.bias_add(x, b, data_format="NCHW"), (normal(2, 3, 2, 2), normal(3))),
    GradCase("xw_plus_b", tf.nn.xw_plus_b, (normal(2, 3), normal(3, 4), normal(4))),
    GradCase("moments", lambda x: list(tf.nn.moments(x, [0, 1])), (normal(3, 2, 2),)),
    GradCase("mlp", lambda x, w1, w2: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([1, 0, 2]), logits=tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)),
        (normal(3, 4), normal(4, 5), normal(5, 3))),
] + [
    GradCase(f"conv2d-{xs}-{ws}-{s}-{p}-{d}",
             lambda x, w, s=s, p=p, d=d: tf.nn.conv2d(x, w, [1, *s, 1], p, dilations=[1, *d, 1]),
             (normal(*xs), normal(*ws)))
    for xs, ws, s, p, d in [
        ((1, 4, 4, 2), (3, 3, 2, 2), (1, 1), "SAME", (1, 1)),
        ((2, 5, 4, 1), (2, 3, 1, 2), (2, 2), "SAME", (1, 1)),
        ((1, 5, 6, 2), (3, 2, 2, 1), (2, 3), "VALID", (1, 1)),
        ((1, 5, 5, 1), (2, 2, 1, 1), (1, 1), "SAME", (2, 2)),
        ((0, 3, 3, 1), (2, 2, 1, 1), (1, 1), "SAME", (1, 1)),
    ]
] + [
    GradCase(f"{kind}_pool-{xs}-{k}-{s}-{p}",
             lambda x, kind=kind, k=k, s=s, p=p: getattr(tf.nn, f"{kind}_pool")(x, [1, *k, 1], [1, *s, 1], p),
             (normal(*xs),))
    for kind in ("max", "avg")
    for xs, k, s, p in [((1, 4, 4, 2), (2, 2), (2, 2), "SAME"), ((2, 5, 5, 1), (3, 3), (2, 2), "SAME"),
                        ((1, 5, 4, 1), (2, 3), (1, 1), "VALID"), ((1, 3, 3, 1), (2, 2), (1, 1), "SAME")]
] + [
    GradCase("conv2d_backprop_input", lambda w, g: tf.nn.conv2d_backprop_input(
        [1, 4, 4, 2], w, g, [1, 2, 2, 1], "SAME"), (normal(3, 3, 2, 3), normal(1, 2, 2, 3))),
    GradCase("conv2d_backprop_filter", lambda x, g: tf.nn.conv2d_backprop_filter(
        x, [2, 2, 2, 3], g, [1, 1, 1, 1], "VALID"), (normal(1, 3, 3, 2), normal(1, 2, 2, 3))),
    GradCase("avg_pool-second-order", lambda x: tf.gradients(
        tf.reduce_sum(tf.nn.avg_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "SAME") ** 2), x)[0], (normal(1, 3, 3, 1),)),
    GradCase("relu-second-order", lambda x: tf.gradients(tf.reduce_sum(tf.nn.relu(x) ** 2), x)[0], (normal(3, 2),)),
    GradCase("bias_add-second-order", lambda x, b: tf.gradients(tf.reduce_sum(tf.nn.bias_add(x, b) ** 2), b)[0],
             (normal(2, 3), normal(3))),
    GradCase("slice-second-order", lambda x: tf.gradients(tf.reduce_sum(x[1:, ::2] ** 2), x)[0], (normal(3, 4),)),
]

ALL_CASES = MATH_CASES + REDUCTION_CASES + ARRAY_CASES + NN_CASES


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_gradient_matches_finite_differences(case: GradCase) -> None:
    check_gradient(case.build, *case.inputs, wrt=case.wrt, rtol=case.rtol, atol=case.atol)


DYNAMIC_CASES = [c for c in ALL_CASES if c.id in {
    "add-(3, 4)-(4,)", "multiply-(2, 1, 3)-(4, 1)", "reduce_sum-axis1-keepFalse", "reduce_mean-axis[0, 2]-keepFalse",
    "reduce_max-axis-1-keepTrue", "concat", "gather-axis1", "tile", "stack", "split",
    "getitem-(None, 0)", "getitem-slice(None, None, -1)", "bias_add", "softmax-axis0", "sparse_softmax_xent",
    "conv2d-(2, 5, 4, 1)-(2, 3, 1, 2)-(2, 2)-SAME-(1, 1)", "max_pool-(2, 5, 5, 1)-(3, 3)-(2, 2)-SAME",
    "avg_pool-(2, 5, 5, 1)-(3, 3)-(2, 2)-SAME", "moments", "expand_dims", "squeeze", "transpose-perm",
}]


def test_dynamic_cases_are_all_found() -> None:
    assert len(DYNAMIC_CASES) == 22


@pytest.mark.parametrize("case", DYNAMIC_CASES, ids=lambda c: c.id)
def test_gradient_with_unknown_static_dimensions(case: GradCase) -> None:
    check_gradient(case.build, *case.inputs, wrt=case.wrt, rtol=case.rtol, atol=case.atol, unknown_dims=True)


# ---------------------------------------------------------------- gradients that are None or exact


def test_v1_softmax_cross_entropy_passes_no_gradient_to_labels() -> None:
    logits, labels = tf.zeros([2, 3]), tf.ones([2, 3]) / 3
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    assert tf.gradients(loss, labels) == [None]
    loss_v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    assert tf.gradients(loss_v2, labels)[0] is not None


def test_integer_inputs_get_no_gradient() -> None:
    params = tf.zeros([4, 2])
    indices = tf.placeholder(tf.int32, [3])
    y = tf.gather(params, indices) + tf.cast(tf.argmax(params, 1)[:1], tf.float32)[:, None]
    assert tf.gradients(y, [indices])[0] is None
    labels = tf.placeholder(tf.int32, [2])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.zeros([2, 3]))
    assert tf.gradients(loss, labels) == [None]


def test_dropout_gradient_is_the_scaled_mask(session: Any) -> None:
    x = tf.constant(RNG.standard_normal((20, 30)))
    y = tf.nn.dropout(x, keep_prob=0.6, seed=5)
    grad = tf.gradients(tf.reduce_sum(y), x)[0]
    y_value, grad_value = session.run([y, grad])
    np.testing.assert_allclose(grad_value, (y_value != 0) / 0.6)


def test_max_pool_sends_the_gradient_to_the_first_maximum(session: Any) -> None:
    x = tf.constant(np.array([[1.0, 3.0], [3.0, 2.0]]).reshape(1, 2, 2, 1))
    pooled = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    grad = session.run(tf.gradients(pooled, x)[0])
    np.testing.assert_array_equal(grad.reshape(2, 2), [[0.0, 1.0], [0.0, 0.0]])



def _distinct_pool_input() -> np.ndarray:
    """Values at least 0.1 apart, so no finite-difference step changes a window's maximum."""
    return (RNG.permutation(2 * 5 * 5 * 2) * 0.1).reshape(2, 5, 5, 2).astype(np.float64)


def _max_pool_backprop(x: Any, upstream: Any) -> Any:
    """MaxPoolGrad(x, max_pool(x), upstream), through ``tf.gradients`` (overlapping SAME windows)."""
    pooled = tf.nn.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
    return tf.gradients(pooled, x, grad_ys=upstream)[0]


def test_max_pool_grad_has_a_second_order_gradient() -> None:
    """MaxPoolGrad's rule (MaxPoolGradGrad) against central differences, in the pooled gradient and in x."""
    check_gradient(_max_pool_backprop, _distinct_pool_input(), RNG.standard_normal((2, 3, 3, 2)))


def test_max_pool_grad_grad_has_a_gradient() -> None:
    def build(x: Any, upstream: Any, direction: Any) -> Any:
        return tf.gradients(_max_pool_backprop(x, upstream), upstream, grad_ys=direction)[0]

    check_gradient(build, _distinct_pool_input(), RNG.standard_normal((2, 3, 3, 2)),
                   RNG.standard_normal((2, 5, 5, 2)), wrt=[0, 2])

def test_gradient_check_catches_a_wrong_rule() -> None:
    """The oracle itself: a deliberately wrong gradient must fail the check."""

    def build(x: Any) -> Any:
        with x.graph.gradient_override_map({"Exp": "Log"}):
            return tf.exp(x)

    with pytest.raises(AssertionError, match="symbolic vs numeric"):
        check_gradient(build, positive(3))
