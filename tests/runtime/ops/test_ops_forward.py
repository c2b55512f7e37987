"""Every op's forward result against numpy, over shapes with broadcasting and size-0 dimensions,
and the errors a user gets for bad input (at graph construction and at run time).

Each case is a ``Case``: a tensorgrid function, a numpy oracle and the inputs. Inputs
are fed through placeholders of their static shape; the result must have the oracle's
values and shape, the dtype the tensor declares, and a shape compatible with the
tensor's static shape. ``test_backends`` runs the same cases on the GPU backend.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable, Optional

import numpy as np
import pytest

import tensorgrid as tf

RNG = np.random.default_rng(1234)


def normal(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def positive(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype(dtype)


def ints(*shape: int, low: int = 0, high: int = 5, dtype: Any = np.int32) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(dtype)


@dataclasses.dataclass
class Case:
    id: str
    build: Callable[..., Any]
    oracle: Callable[..., Any]
    inputs: tuple[np.ndarray, ...]
    rtol: float = 1e-5
    atol: float = 1e-6


def run_case(case: Case, device: Optional[str] = None) -> None:
    """Builds ``case`` in a fresh graph (optionally under ``tf.device``) and checks it against numpy."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        placeholders = [tf.placeholder(tf.as_dtype(x.dtype), x.shape) for x in case.inputs]
        built = case.build(*placeholders)
    outputs = list(built) if isinstance(built, (list, tuple)) else [built]
    expected = case.oracle(*case.inputs)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    assert len(outputs) == len(expected)
    with tf.Session(graph=graph) as sess:
        values = sess.run(outputs, dict(zip(placeholders, case.inputs)))
    for tensor, value, want in zip(outputs, values, expected):
        value, want = np.asarray(value), np.asarray(want)
        assert value.dtype == tensor.dtype.as_numpy_dtype, f"{tensor.name}: dtype {value.dtype} != {tensor.dtype}"
        assert value.shape == want.shape, f"{tensor.name}: shape {value.shape}, numpy gives {want.shape}"
        assert tensor.shape.is_compatible_with(value.shape), f"static shape {tensor.shape} vs {value.shape}"
        if value.dtype.kind in "biu":
            np.testing.assert_array_equal(value, want)
        else:
            np.testing.assert_allclose(value, want, rtol=case.rtol, atol=case.atol)


# ---------------------------------------------------------------- element-wise math

BROADCAST_SHAPES = [
    ((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (3,)), ((5,), ()),
    ((0, 3), (3,)), ((2, 0), (1, 0)), ((0,), (1,)),
]

BINARY = {
    "add": (tf.add, np.add, normal, normal),
    "subtract": (tf.subtract, np.subtract, normal, normal),
    "multiply": (tf.multiply, np.multiply, normal, normal),
    "div": (tf.div, np.true_divide, normal, positive),
    "pow": (tf.pow, np.power, positive, normal),
    "maximum": (tf.maximum, np.maximum, normal, normal),
    "minimum": (tf.minimum, np.minimum, normal, normal),
    "squared_difference": (tf.squared_difference, lambda a, b: (a - b) ** 2, normal, normal),
    "equal": (tf.equal, np.equal, lambda *s: ints(*s, high=3), lambda *s: ints(*s, high=3)),
    "less": (tf.less, np.less, normal, normal),
    "greater_equal": (tf.greater_equal, np.greater_equal, normal, normal),
    "floordiv": (tf.floordiv, np.floor_divide, lambda *s: ints(*s, low=-9, high=9), lambda *s: ints(*s, low=1, high=4)),
}

BINARY_CASES = [
    Case(f"{name}-{a}-{b}", fn, oracle, (gen_a(*a), gen_b(*b)))
    for name, (fn, oracle, gen_a, gen_b) in BINARY.items()
    for a, b in BROADCAST_SHAPES
]

UNARY = {
    "negative": (tf.negative, np.negative, normal),
    "square": (tf.square, np.square, normal),
    "sqrt": (tf.sqrt, np.sqrt, positive),
    "rsqrt": (tf.rsqrt, lambda x: 1 / np.sqrt(x), positive),
    "exp": (tf.exp, np.exp, normal),
    "log": (tf.log, np.log, positive),
    "abs": (tf.abs, np.abs, normal),
    "reciprocal": (tf.reciprocal, np.reciprocal, positive),
    "floor": (tf.floor, np.floor, normal),
    "sigmoid": (tf.sigmoid, lambda x: 1 / (1 + np.exp(-x)), normal),
    "tanh": (tf.tanh, np.tanh, normal),
    "relu": (tf.nn.relu, lambda x: np.maximum(x, 0), normal),
    "relu6": (tf.nn.relu6, lambda x: np.clip(x, 0, 6), lambda *s: normal(*s) * 5),
    "leaky_relu": (tf.nn.leaky_relu, lambda x: np.where(x > 0, x, 0.2 * x), normal),
    "nn.sigmoid": (tf.nn.sigmoid, lambda x: 1 / (1 + np.exp(-x)), normal),
    "nn.tanh": (tf.nn.tanh, np.tanh, normal),
}

UNARY_CASES = [
    Case(f"{name}-{shape}", fn, oracle, (gen(*shape),))
    for name, (fn, oracle, gen) in UNARY.items()
    for shape in [(), (5,), (2, 3), (0, 4)]
]

OTHER_MATH_CASES = [
    Case("relu-int32", tf.nn.relu, lambda x: np.maximum(x, 0), (ints(3, 4, low=-5),)),
    Case("sigmoid-extremes", tf.sigmoid, lambda x: np.exp(-np.logaddexp(0, -x.astype(np.float64))),
         (np.array([-1000, -50, 0, 50, 1000], np.float32),)),
    Case("add-float64", tf.add, np.add, (normal(2, 3, dtype=np.float64), normal(3, dtype=np.float64))),
    Case("add-int64", tf.add, np.add, (ints(2, 3, dtype=np.int64), ints(3, dtype=np.int64))),
    Case("add-python-scalar", lambda x: x + 2.5, lambda x: x + np.float32(2.5), (normal(3),)),
    Case("rsub-python-scalar", lambda x: 1 - x, lambda x: 1 - x, (normal(3),)),
    Case("truediv-int", tf.truediv, lambda a, b: a / b, (ints(4, low=-5), ints(4, low=1))),
    Case("cast-float-int", lambda x: tf.cast(x, tf.int32), lambda x: x.astype(np.int32), (normal(3, 4) * 3,)),
    Case("cast-int-float", lambda x: tf.cast(x, tf.float32), lambda x: x.astype(np.float32), (ints(3, 4),)),
    Case("cast-bool", lambda x: tf.cast(x > 0, tf.float32), lambda x: (x > 0).astype(np.float32), (normal(5),)),
    Case("add_n", lambda a, b, c: tf.add_n([a, b, c]), lambda a, b, c: a + b + c, (normal(2, 3), normal(2, 3), normal(2, 3))),
    Case("operators", lambda a, b: (a + b) * a - b / 2.0 + (-a) ** 2, lambda a, b: (a + b) * a - b / 2 + a ** 2,
         (normal(3), normal(3))),
]

MATMUL_CASES = [
    Case(f"matmul-{a}-{b}-ta{ta}-tb{tb}",
         lambda x, y, ta=ta, tb=tb: tf.matmul(x, y, transpose_a=ta, transpose_b=tb),
         lambda x, y, ta=ta, tb=tb: (x.T if ta else x) @ (y.T if tb else y), (normal(*a), normal(*b)))
    for (a, b, ta, tb) in [((3, 4), (4, 2), False, False), ((4, 3), (4, 2), True, False),
                           ((3, 4), (2, 4), False, True), ((4, 3), (2, 4), True, True),
                           ((0, 3), (3, 2), False, False), ((3, 0), (0, 2), False, False), ((1, 1), (1, 5), False, False)]
] + [Case("matmul-operator", lambda x, y: x @ y, lambda x, y: x @ y, (normal(2, 3), normal(3, 2)))]

REDUCTIONS = {
    "reduce_sum": (tf.reduce_sum, np.sum),
    "reduce_mean": (tf.reduce_mean, np.mean),
    "reduce_max": (tf.reduce_max, np.max),
    "reduce_min": (tf.reduce_min, np.min),
    "reduce_prod": (tf.reduce_prod, np.prod),
}

REDUCTION_CASES = [
    Case(f"{name}-axis{axis}-keep{keep}",
         lambda x, fn=fn, axis=axis, keep=keep: fn(x, axis=axis, keepdims=keep),
         lambda x, oracle=oracle, axis=axis, keep=keep: oracle(x, axis=None if axis is None else tuple(np.atleast_1d(axis)),
                                                               keepdims=keep),
         (normal(2, 3, 4),))
    for name, (fn, oracle) in REDUCTIONS.items()
    for axis in [None, 0, -1, [0, 2]]
    for keep in [False, True]
] + [
    Case("reduce_sum-empty", lambda x: tf.reduce_sum(x, axis=0), lambda x: x.sum(axis=0), (normal(0, 3),)),
    Case("reduce_sum-empty-all", lambda x: tf.reduce_sum(x), lambda x: x.sum(), (normal(2, 0),)),
    Case("reduce_sum-int", lambda x: tf.reduce_sum(x, 1), lambda x: x.sum(1).astype(np.int32), (ints(3, 4),)),
    Case("reduce_mean-int", lambda x: tf.reduce_mean(x, 0), lambda x: x.sum(0) // 3, (ints(3, 4),)),
    Case("reduce_sum-keep_dims-alias", lambda x: tf.reduce_sum(x, 1, keep_dims=True), lambda x: x.sum(1, keepdims=True),
         (normal(3, 4),)),
    Case("reduce_sum-reduction_indices", lambda x: tf.reduce_sum(x, reduction_indices=[1]), lambda x: x.sum(1),
         (normal(3, 4),)),
    Case("argmax-0", lambda x: tf.argmax(x, 0), lambda x: np.argmax(x, 0), (normal(3, 4),)),
    Case("argmax-1", lambda x: tf.argmax(x, axis=1), lambda x: np.argmax(x, 1), (normal(3, 4),)),
    Case("argmax-int32-out", lambda x: tf.argmax(x, 1, output_type=tf.int32), lambda x: np.argmax(x, 1).astype(np.int32),
         (normal(3, 4),)),
    Case("argmin-1", lambda x: tf.argmin(x, 1), lambda x: np.argmin(x, 1), (normal(3, 4),)),
]

# ---------------------------------------------------------------- shapes and fills

SHAPE_CASES = [
    Case("reshape", lambda x: tf.reshape(x, [4, 3]), lambda x: x.reshape(4, 3), (normal(2, 6),)),
    Case("reshape-minus1", lambda x: tf.reshape(x, [-1, 2]), lambda x: x.reshape(-1, 2), (normal(2, 3, 2),)),
    Case("reshape-scalar", lambda x: tf.reshape(x, []), lambda x: x.reshape(()), (normal(1, 1),)),
    Case("reshape-empty", lambda x: tf.reshape(x, [0, 5]), lambda x: x.reshape(0, 5), (normal(5, 0),)),
    Case("zeros", lambda x: x + tf.zeros([2, 3]), lambda x: x, (normal(2, 3),)),
    Case("ones-int", lambda x: tf.ones([2, 2], dtype=tf.int32) + x, lambda x: x + 1, (ints(2, 2),)),
    Case("fill", lambda x: tf.fill([2, 3], 7.0) * x, lambda x: 7 * x, (normal(2, 3),)),
    Case("fill-dynamic", lambda x: tf.fill(tf.shape(x), 2.0), lambda x: np.full(x.shape, 2, np.float32), (normal(2, 3),)),
    Case("zeros_like", tf.zeros_like, np.zeros_like, (normal(2, 3),)),
    Case("ones_like", tf.ones_like, np.ones_like, (normal(0, 3),)),
    Case("shape", lambda x: tf.shape(x), lambda x: np.array(x.shape, np.int32), (normal(2, 3),)),
]

# ---------------------------------------------------------------- array ops

ARRAY_CASES = [
    Case("transpose-default", tf.transpose, lambda x: x.T, (normal(2, 3, 4),)),
    Case("transpose-perm", lambda x: tf.transpose(x, [1, 2, 0]), lambda x: x.transpose(1, 2, 0), (normal(2, 3, 4),)),
    Case("transpose-empty", lambda x: tf.transpose(x, [1, 0]), lambda x: x.T, (normal(0, 3),)),
    Case("concat-0", lambda a, b: tf.concat([a, b], 0), lambda a, b: np.concatenate([a, b], 0), (normal(2, 3), normal(4, 3))),
    Case("concat-neg", lambda a, b: tf.concat([a, b], -1), lambda a, b: np.concatenate([a, b], -1),
         (normal(2, 3), normal(2, 1))),
    Case("concat-three", lambda a, b, c: tf.concat([a, b, c], axis=1), lambda a, b, c: np.concatenate([a, b, c], 1),
         (normal(2, 1, 2), normal(2, 0, 2), normal(2, 3, 2))),
    Case("concat-python-values", lambda a: tf.concat([a, [[1.0, 2.0]]], 0), lambda a: np.concatenate([a, [[1, 2]]], 0),
         (normal(2, 2),)),
    Case("split-equal", lambda x: tf.split(x, 3, axis=1), lambda x: np.split(x, 3, axis=1), (normal(2, 6),)),
    Case("split-sizes", lambda x: tf.split(x, [1, -1, 2], axis=0), lambda x: np.split(x, [1, 3], axis=0), (normal(5, 2),)),
    Case("gather-0", lambda x: tf.gather(x, [2, 0, 2]), lambda x: x[[2, 0, 2]], (normal(3, 4),)),
    Case("gather-axis1", lambda x: tf.gather(x, [[3, 0], [1, 1]], axis=1), lambda x: np.take(x, [[3, 0], [1, 1]], axis=1),
         (normal(2, 4, 3),)),
    Case("gather-scalar-index", lambda x: tf.gather(x, 1), lambda x: x[1], (normal(3, 4),)),
    Case("gather-empty-index", lambda x: tf.gather(x, np.zeros([0], np.int32)), lambda x: x[:0], (normal(3, 4),)),
    Case("gather-fed-index", tf.gather, lambda x, i: x[i], (normal(5, 2), ints(3, 2, high=5))),
    Case("embedding_lookup", tf.nn.embedding_lookup, lambda x, i: x[i], (normal(6, 3), ints(4, high=6, dtype=np.int64))),
    Case("unsorted_segment_sum", lambda x, i: tf.unsorted_segment_sum(x, i, 4),
         lambda x, i: np.stack([x[i == s].sum(0) for s in range(4)]), (normal(6, 2), np.array([0, 3, 3, -1, 0, 1], np.int32))),
    Case("one_hot", lambda i: tf.one_hot(i, 4), lambda i: np.eye(4, dtype=np.float32)[i], (ints(5, high=4),)),
    Case("one_hot-out-of-range", lambda i: tf.one_hot(i, 3),
         lambda i: np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0]], np.float32), (np.array([0, 3, -1], np.int32),)),
    Case("one_hot-axis0-values", lambda i: tf.one_hot(i, 3, on_value=5, off_value=-1, axis=0),
         lambda i: np.where(np.eye(3, dtype=bool)[i].T, 5, -1).astype(np.int32), (ints(2, high=3),)),
    Case("one_hot-dtype", lambda i: tf.one_hot(i, 3, dtype=tf.float64), lambda i: np.eye(3)[i], (ints(2, 2, high=3),)),
    Case("expand_dims-0", lambda x: tf.expand_dims(x, 0), lambda x: x[None], (normal(2, 3),)),
    Case("expand_dims-neg", lambda x: tf.expand_dims(x, -1), lambda x: x[..., None], (normal(2, 3),)),
    Case("squeeze-all", tf.squeeze, np.squeeze, (normal(1, 3, 1),)),
    Case("squeeze-axis", lambda x: tf.squeeze(x, [2]), lambda x: x[:, :, 0], (normal(1, 3, 1),)),
    Case("stack", lambda a, b: tf.stack([a, b]), lambda a, b: np.stack([a, b]), (normal(2, 3), normal(2, 3))),
    Case("stack-axis-last", lambda a, b: tf.stack([a, b], axis=-1), lambda a, b: np.stack([a, b], -1),
         (normal(2, 3), normal(2, 3))),
    Case("stack-scalars", lambda a: tf.stack([a, 2.0, a]), lambda a: np.stack([a, np.float32(2), a]), (normal(),)),
    Case("unstack", lambda x: tf.unstack(x, axis=1), lambda x: list(np.moveaxis(x, 1, 0)), (normal(2, 3, 2),)),
    Case("where", lambda c, a, b: tf.where(c, a, b), np.where,
         (normal(3, 4) > 0, normal(3, 4), normal(3, 4))),
    Case("where-vector-condition", lambda c, a, b: tf.where(c, a, b), lambda c, a, b: np.where(c[:, None], a, b),
         (np.array([True, False, True]), normal(3, 2), normal(3, 2))),
    Case("where-coordinates", tf.where, np.argwhere, (normal(3, 4) > 0,)),
    Case("tile", lambda x: tf.tile(x, [2, 3]), lambda x: np.tile(x, [2, 3]), (normal(2, 3),)),
    Case("tile-zero", lambda x: tf.tile(x, [1, 0, 2]), lambda x: np.tile(x, [1, 0, 2]), (normal(2, 3, 1),)),
    Case("clip_by_value", lambda x: tf.clip_by_value(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), (normal(3, 4),)),
    Case("clip_by_norm", lambda x: tf.clip_by_norm(x, 1.0), lambda x: x / max(np.linalg.norm(x), 1.0), (normal(3, 4),)),
    Case("clip_by_global_norm",
         lambda a, b: tf.clip_by_global_norm([a, b], 1.0)[0] + [tf.clip_by_global_norm([a, b], 1.0)[1]],
         lambda a, b: [a / max(math.hypot(np.linalg.norm(a), np.linalg.norm(b)), 1),
                       b / max(math.hypot(np.linalg.norm(a), np.linalg.norm(b)), 1),
                       np.float32(math.hypot(np.linalg.norm(a), np.linalg.norm(b)))],
         (normal(3, 4), normal(5))),
    Case("clip_by_global_norm-within", lambda a: tf.clip_by_global_norm([a], 100.0)[0][0], lambda a: a, (normal(3),)),
    Case("l2_loss", tf.nn.l2_loss, lambda x: np.sum(x ** 2) / 2, (normal(3, 4),)),
    Case("one_hot-empty", lambda i: tf.one_hot(i, 3), lambda i: np.zeros([0, 3], np.float32), (ints(0),)),
    Case("stack-empty", lambda a, b: tf.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), (normal(0, 2), normal(0, 2))),
    Case("tile-empty", lambda x: tf.tile(x, [3, 2]), lambda x: np.tile(x, [3, 2]), (normal(0, 2),)),
    Case("where-empty", lambda c, a, b: tf.where(c, a, b), np.where, (np.zeros([0, 2], bool), normal(0, 2), normal(0, 2))),
    Case("transpose-3d-empty", lambda x: tf.transpose(x, [2, 0, 1]), lambda x: x.transpose(2, 0, 1), (normal(2, 0, 3),)),
    Case("bias_add-empty", tf.nn.bias_add, lambda x, b: x + b, (normal(0, 3), normal(3))),
]

SLICE_KEYS = [
    1, -1, slice(1, None), slice(None, None, -1), slice(-3, -1), slice(None, None, 2),
    (1, 2), (slice(None), 0), (Ellipsis, 1), (Ellipsis, None), (None, 0), (0, None, slice(1, 3)),
    (slice(None), slice(None, None, -2), 1), (slice(10, 20),), (slice(-100, 100, 3), Ellipsis, -2),
]

SLICE_CASES = [
    Case(f"getitem-{key!r}", lambda x, key=key: x[key], lambda x, key=key: x[key], (normal(4, 5, 3),))
    for key in SLICE_KEYS
] + [
    Case("getitem-empty", lambda x: x[:, 1:], lambda x: x[:, 1:], (normal(0, 3),)),
    Case("getitem-tensor-index", lambda x, i: x[i, 1:], lambda x, i: x[i, 1:], (normal(4, 3), np.array(2, np.int32))),
    Case("getitem-tensor-bounds", lambda x, i: x[i:i + 2], lambda x, i: x[i:i + 2], (normal(5, 2), np.array(1, np.int32))),
    Case("strided_slice", lambda x: tf.strided_slice(x, [0, 1], [3, 4], [2, 1]), lambda x: x[0:3:2, 1:4], (normal(4, 5),)),
    Case("slice", lambda x: tf.slice(x, [1, 0], [2, -1]), lambda x: x[1:3, 0:], (normal(4, 5),)),
]

# ---------------------------------------------------------------- nn ops


def np_log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def np_same_padding(size: int, window: int, stride: int, dilation: int, padding: str) -> tuple[int, int, int]:
    """TensorFlow's padding rule, written out independently of the kernels: (output, before, after)."""
    extent = (window - 1) * dilation + 1
    if padding == "VALID":
        return (size - extent) // stride + 1, 0, 0
    out = -(-size // stride)
    total = max((out - 1) * stride + extent - size, 0)
    return out, total // 2, total - total // 2


def np_windows(x: np.ndarray, window: tuple[int, int], strides: tuple[int, int], padding: str,
               dilation: tuple[int, int] = (1, 1), fill: float = 0.0) -> np.ndarray:
    """Every window of NHWC ``x`` as (N, OH, OW, KH, KW, C), by plain loops (the reference)."""
    n, h, w, c = x.shape
    oh, top, bottom = np_same_padding(h, window[0], strides[0], dilation[0], padding)
    ow, left, right = np_same_padding(w, window[1], strides[1], dilation[1], padding)
    padded = np.full((n, h + top + bottom, w + left + right, c), fill, x.dtype)
    padded[:, top:top + h, left:left + w, :] = x
    out = np.zeros((n, oh, ow, window[0], window[1], c), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(window[0]):
                for b in range(window[1]):
                    out[:, i, j, a, b, :] = padded[:, i * strides[0] + a * dilation[0], j * strides[1] + b * dilation[1], :]
    return out


def np_conv2d(x: np.ndarray, w: np.ndarray, strides: tuple[int, int], padding: str,
              dilation: tuple[int, int] = (1, 1)) -> np.ndarray:
    patches = np_windows(x, w.shape[:2], strides, padding, dilation)
    return np.einsum("nhwabc,abco->nhwo", patches, w)


def np_pool(x: np.ndarray, window: tuple[int, int], strides: tuple[int, int], padding: str, kind: str) -> np.ndarray:
    if kind == "max":
        return np_windows(x, window, strides, padding, fill=-np.inf).max(axis=(3, 4))
    sums = np_windows(x, window, strides, padding).sum(axis=(3, 4))
    counts = np_windows(np.ones_like(x[:1, :, :, :1]), window, strides, padding).sum(axis=(3, 4))
    return sums / counts


CONV_GEOMETRIES = [
    # (input NHWC, filter HWIO, strides, padding, dilations)
    ((2, 5, 5, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((1, 6, 7, 2), (3, 2, 2, 3), (2, 3), "SAME", (1, 1)),
    ((2, 6, 6, 1), (2, 2, 1, 2), (2, 2), "SAME", (1, 1)),
    ((1, 4, 5, 2), (4, 4, 2, 1), (3, 3), "SAME", (1, 1)),
    ((2, 5, 6, 2), (3, 3, 2, 2), (1, 1), "VALID", (1, 1)),
    ((1, 7, 6, 3), (3, 2, 3, 2), (2, 2), "VALID", (1, 1)),
    ((1, 7, 7, 2), (3, 3, 2, 2), (1, 1), "SAME", (2, 2)),
    ((0, 5, 5, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
]

POOL_GEOMETRIES = [
    # (input NHWC, window, strides, padding)
    ((2, 5, 5, 3), (2, 2), (2, 2), "SAME"),
    ((1, 6, 7, 2), (3, 3), (2, 2), "SAME"),
    ((1, 5, 5, 1), (3, 2), (1, 1), "SAME"),
    ((2, 6, 6, 2), (2, 2), (2, 2), "VALID"),
    ((1, 7, 5, 2), (3, 3), (2, 1), "VALID"),
    ((0, 4, 4, 1), (2, 2), (2, 2), "SAME"),
]

NN_CASES = [
    Case("softmax", tf.nn.softmax, lambda x: np.exp(np_log_softmax(x)), (normal(3, 5),)),
    Case("softmax-axis0", lambda x: tf.nn.softmax(x, axis=0), lambda x: np.exp(np_log_softmax(x, 0)), (normal(3, 5),)),
    Case("softmax-large", tf.nn.softmax, lambda x: np.exp(np_log_softmax(x.astype(np.float64))),
         (np.array([[1000.0, 0.0, -1000.0], [5e4, 5e4, 0]], np.float32),)),
    Case("softmax-empty", tf.nn.softmax, lambda x: x, (normal(0, 4),)),
    Case("log_softmax", tf.nn.log_softmax, np_log_softmax, (normal(2, 3, 4),)),
    Case("log_softmax-large", tf.nn.log_softmax, lambda x: np_log_softmax(x.astype(np.float64)),
         (np.array([[1000.0, 0.0, -1000.0]], np.float32),), atol=1e-3),
    Case("sparse_softmax_xent", lambda x, y: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x),
         lambda x, y: -np.take_along_axis(np_log_softmax(x), y[:, None].astype(np.int64), 1)[:, 0],
         (normal(4, 5), ints(4, high=5))),
    Case("sparse_softmax_xent-rank3", lambda x, y: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x),
         lambda x, y: -np.take_along_axis(np_log_softmax(x), y[..., None], -1)[..., 0],
         (normal(2, 3, 4), ints(2, 3, high=4, dtype=np.int64))),
    Case("sparse_softmax_xent-empty", lambda x, y: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x),
         lambda x, y: np.zeros(0, np.float32), (normal(0, 5), ints(0))),
    Case("softmax_xent", lambda x, y: tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=x),
         lambda x, y: -(y * np_log_softmax(x)).sum(-1), (normal(4, 3), np.eye(3, dtype=np.float32)[[0, 2, 1, 1]])),
    Case("softmax_xent_v2-soft-labels", lambda x, y: tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x),
         lambda x, y: -(y * np_log_softmax(x)).sum(-1), (normal(4, 3), np.exp(np_log_softmax(normal(4, 3))))),
    Case("softmax_xent-axis0", lambda x, y: tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x, axis=0),
         lambda x, y: -(y * np_log_softmax(x, 0)).sum(0), (normal(3, 2), np.eye(3, dtype=np.float32)[:, [0, 2]])),
    Case("bias_add", tf.nn.bias_add, lambda x, b: x + b, (normal(2, 3, 4), normal(4))),
    Case("bias_add-NCHW", lambda x, b: tf.nn.bias_add(x, b, data_format="NCHW"), lambda x, b: x + b[:, None, None],
         (normal(2, 3, 4, 5), normal(3))),
    Case("xw_plus_b", tf.nn.xw_plus_b, lambda x, w, b: x @ w + b, (normal(2, 3), normal(3, 4), normal(4))),
    Case("in_top_k", lambda p, t: tf.nn.in_top_k(p, t, 2),
         lambda p, t: np.array([True, False, True, False]),
         (np.array([[0.1, 0.8, 0.1], [0.5, 0.3, 0.2], [0.3, 0.3, 0.4], [0.2, 0.5, 0.3]], np.float32),
          np.array([0, 2, 0, 5], np.int32))),
    Case("in_top_k-ties", lambda p, t: tf.nn.in_top_k(p, t, 1), lambda p, t: np.array([True, True]),
         (np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], np.float32), np.array([0, 1], np.int32))),
    Case("moments", lambda x: list(tf.nn.moments(x, [0, 1])), lambda x: [x.mean((0, 1)), x.var((0, 1))],
         (normal(4, 3, 2),)),
    Case("moments-keep_dims", lambda x: list(tf.nn.moments(x, [1], keep_dims=True)),
         lambda x: [x.mean(1, keepdims=True), x.var(1, keepdims=True)], (normal(4, 3),)),
] + [
    Case(f"conv2d-{xs}-{ws}-{s}-{p}-{d}",
         lambda x, w, s=s, p=p, d=d: tf.nn.conv2d(x, w, [1, *s, 1], p, dilations=[1, *d, 1]),
         lambda x, w, s=s, p=p, d=d: np_conv2d(x, w, s, p, d),
         (normal(*xs), normal(*ws)))
    for xs, ws, s, p, d in CONV_GEOMETRIES
] + [
    Case(f"{kind}_pool-{xs}-{k}-{s}-{p}",
         lambda x, kind=kind, k=k, s=s, p=p: getattr(tf.nn, f"{kind}_pool")(x, [1, *k, 1], [1, *s, 1], p),
         lambda x, kind=kind, k=k, s=s, p=p: np_pool(x, k, s, p, kind),
         (normal(*xs),))
    for kind in ("max", "avg")
    for xs, k, s, p in POOL_GEOMETRIES
]

ALL_CASES = (BINARY_CASES + UNARY_CASES + OTHER_MATH_CASES + MATMUL_CASES + REDUCTION_CASES + SHAPE_CASES
             + ARRAY_CASES + SLICE_CASES + NN_CASES)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_forward_matches_numpy(case: Case) -> None:
    run_case(case)


# ---------------------------------------------------------------- static shapes

def test_static_shapes_follow_the_ops() -> None:
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    conv = tf.nn.conv2d(x, tf.zeros([5, 5, 1, 32]), [1, 1, 1, 1], "SAME")
    assert conv.shape.as_list() == [None, 28, 28, 32]
    pool = tf.nn.max_pool(conv, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    assert pool.shape.as_list() == [None, 14, 14, 32]
    valid = tf.nn.conv2d(pool, tf.zeros([3, 3, 32, 8]), [1, 2, 2, 1], "VALID")
    assert valid.shape.as_list() == [None, 6, 6, 8]
    assert tf.transpose(x, [3, 0, 1, 2]).shape.as_list() == [1, None, 28, 28]
    assert tf.concat([x, x], 3).shape.as_list() == [None, 28, 28, 2]
    assert tf.concat([x, x], 0).shape.as_list() == [None, 28, 28, 1]
    assert x[:, 2:10:3, ..., 0].shape.as_list() == [None, 3, 28]
    assert x[tf.newaxis, 0].shape.as_list() == [1, 28, 28, 1]
    assert tf.gather(x, [1, 2], axis=1).shape.as_list() == [None, 2, 28, 1]
    assert tf.one_hot(tf.placeholder(tf.int32, [None]), 10).shape.as_list() == [None, 10]
    assert tf.squeeze(x, [3]).shape.as_list() == [None, 28, 28]
    assert tf.tile(x, [1, 2, 1, 3]).shape.as_list() == [None, 56, 28, 3]
    assert [t.shape.as_list() for t in tf.unstack(tf.zeros([3, 2]), axis=1)] == [[3], [3]]
    assert tf.stack([x, x], axis=1).shape.as_list() == [None, 2, 28, 28, 1]


# ---------------------------------------------------------------- dropout


def test_dropout_keeps_a_fraction_and_scales_by_one_over_keep_prob(session: Any) -> None:
    x = tf.ones([200, 50])
    y = tf.nn.dropout(x, keep_prob=0.75, seed=3)
    value = session.run(y)
    assert set(np.unique(value)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((value != 0).mean() - 0.75) < 0.02
    assert y.shape.as_list() == [200, 50]


def test_dropout_rate_and_fed_keep_prob(session: Any) -> None:
    x = tf.ones([100, 100])
    by_rate = session.run(tf.nn.dropout(x, rate=0.2, seed=1))
    assert abs((by_rate != 0).mean() - 0.8) < 0.02
    keep_prob = tf.placeholder(tf.float32)
    fed = tf.nn.dropout(x, keep_prob)
    np.testing.assert_array_equal(session.run(fed, {keep_prob: 1.0}), np.ones([100, 100], np.float32))
    assert abs((session.run(fed, {keep_prob: 0.5}) != 0).mean() - 0.5) < 0.03
    assert tf.nn.dropout(x, 1.0) is x


def test_dropout_noise_shape_drops_whole_rows(session: Any) -> None:
    value = session.run(tf.nn.dropout(tf.ones([50, 8]), 0.5, noise_shape=[50, 1], seed=2))
    assert all(len(set(row)) == 1 for row in value)


def test_dropout_is_reproducible_with_a_graph_seed() -> None:
    def sample() -> np.ndarray:
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(7)
            y = tf.nn.dropout(tf.ones([10, 10]), 0.5)
        with tf.Session(graph=graph) as sess:
            return sess.run(y)

    np.testing.assert_array_equal(sample(), sample())


@pytest.mark.parametrize("kwargs, message", [
    ({"keep_prob": 0.0}, "keep_prob=0.0"), ({"keep_prob": 1.5}, "keep_prob=1.5"), ({"rate": 1.0}, "rate=1.0"),
    ({"keep_prob": 0.5, "rate": 0.5}, "either keep_prob or rate"), ({}, "required"),
])
def test_dropout_rejects_bad_probabilities(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        tf.nn.dropout(tf.ones([2]), **kwargs)


# ---------------------------------------------------------------- bad input


def test_matmul_shape_mismatch_names_both_shapes() -> None:
    a = tf.placeholder(tf.float32, [3, 4], name="a")
    b = tf.placeholder(tf.float32, [5, 2], name="b")
    with pytest.raises(ValueError, match=r"4 and 5.*a:0 with shape \(3, 4\).*b:0 with shape \(5, 2\)"):
        tf.matmul(a, b)


def test_runtime_reshape_error_names_the_node(session: Any) -> None:
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.reshape(x, [-1, 3], name="bad_reshape")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)8 values.*\[-1, 3\].*bad_reshape"):
        session.run(y, {x: np.zeros([2, 4])})


def test_conflicting_device_specs_raise() -> None:
    with pytest.raises(ValueError, match="CPU.*GPU"):
        with tf.device("/cpu:0/gpu:0"):
            tf.constant(1.0)


def test_out_of_range_labels_raise_with_the_label(session: Any) -> None:
    logits = tf.placeholder(tf.float32, [None, 3])
    labels = tf.placeholder(tf.int32, [None])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xent")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)label value of 3.*\[0, 3\).*xent"):
        session.run(loss, {logits: np.zeros([2, 3]), labels: [0, 3]})
    constant_labels = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 7], logits=tf.zeros([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"label value of 7 .*\[0, 3\)"):
        session.run(constant_labels)


def test_cross_entropy_needs_named_arguments_and_int_labels() -> None:
    logits = tf.zeros([2, 3])
    with pytest.raises(ValueError, match="named arguments"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits, [0, 1])
    with pytest.raises(ValueError, match="named arguments"):
        tf.nn.softmax_cross_entropy_with_logits(logits, tf.zeros([2, 3]))
    with pytest.raises(TypeError, match="int32 or int64"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([2]), logits=logits)
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*without its last dimension"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([3], tf.int32), logits=logits)
    with pytest.raises(ValueError, match="same shape"):
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.zeros([2, 4]), logits=logits)


def test_gather_out_of_range_index_raises(session: Any) -> None:
    indices = tf.placeholder(tf.int32, [None])
    y = tf.gather(tf.zeros([3, 2]), indices, name="lookup")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)index 3 is not in \[0, 3\).*lookup"):
        session.run(y, {indices: [0, 3]})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"index -1 is not in \[0, 3\)"):
        session.run(y, {indices: [-1]})


def test_array_op_construction_errors_name_the_shapes() -> None:
    a, b = tf.zeros([2, 3], name="a"), tf.zeros([4, 4], name="b")
    with pytest.raises(ValueError, match=r"dimension 1 differs.*a:0 \(2, 3\).*b:0 \(4, 4\)"):
        tf.concat([a, b], 0)
    with pytest.raises(ValueError, match="same rank"):
        tf.concat([a, tf.zeros([2])], 0)
    with pytest.raises(ValueError, match=r"axis 2 is out of range"):
        tf.concat([a, a], 2)
    with pytest.raises(ValueError, match=r"perm \[0, 0\] is not a permutation"):
        tf.transpose(a, [0, 0])
    with pytest.raises(ValueError, match="same shape"):
        tf.stack([a, b])
    with pytest.raises(ValueError, match=r"cannot squeeze dimension 0 .* its size is 2"):
        tf.squeeze(a, [0])
    with pytest.raises(ValueError, match="multiples"):
        tf.tile(a, [2])
    with pytest.raises(ValueError, match=r"must have the shape"):
        tf.where(tf.zeros([3], tf.bool), a, a)
    with pytest.raises(ValueError, match=r"index 5 is out of bounds for dimension 0 of size 2"):
        a[5]
    with pytest.raises(TypeError, match="valid indices"):
        a[[0, 1]]
    with pytest.raises(ValueError, match="step cannot be zero"):
        a[::0]
    with pytest.raises(ValueError, match=r"sum to 3, but dimension 0 of a:0 with shape \(2, 3\) is 2"):
        tf.split(a, [1, 1, 1, 0], axis=0)
    with pytest.raises(ValueError, match="not divisible"):
        tf.split(a, 2, axis=1)


def test_runtime_slice_out_of_bounds_raises(session: Any) -> None:
    x = tf.placeholder(tf.float32, [None])
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of bounds"):
        session.run(x[4], {x: np.zeros(3)})


def test_conv_and_pool_reject_unsupported_arguments() -> None:
    x = tf.zeros([1, 4, 4, 2], name="images")
    w = tf.zeros([3, 3, 3, 1], name="kernel")
    with pytest.raises(ValueError, match=r"images:0 .* has 2 channels but filter kernel:0 .* expects 3"):
        tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
    w = tf.zeros([3, 3, 2, 1])
    with pytest.raises(ValueError, match='data_format="NHWC" only'):
        tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", data_format="NCHW")
    with pytest.raises(ValueError, match='padding must be "SAME" or "VALID"'):
        tf.nn.conv2d(x, w, [1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match="batch and channel"):
        tf.nn.conv2d(x, w, [2, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="must be 4-dimensional"):
        tf.nn.conv2d(tf.zeros([4, 4, 2]), w, [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="output size would be negative"):
        tf.nn.max_pool(x, [1, 5, 5, 1], [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match='data_format="NHWC" only'):
        tf.nn.avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME", data_format="NCHW")


def test_runtime_conv_channel_mismatch_raises(session: Any) -> None:
    x = tf.placeholder(tf.float32, [None, None, None, None])
    y = tf.nn.conv2d(x, tf.zeros([3, 3, 2, 1]), [1, 1, 1, 1], "SAME", name="conv")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)input depth must equal filter depth.*conv"):
        session.run(y, {x: np.zeros([1, 4, 4, 3])})


def test_dtype_errors_name_the_tensor() -> None:
    with pytest.raises(TypeError, match=r"Softmax does not support dtype int32 of ints:0"):
        tf.nn.softmax(tf.zeros([2], tf.int32, name="ints"))
    with pytest.raises(TypeError, match="same dtype"):
        tf.concat([tf.zeros([2]), tf.zeros([2], tf.int32)], 0)
    with pytest.raises(TypeError, match="condition .* must be bool"):
        tf.where(tf.zeros([2]), tf.zeros([2]), tf.zeros([2]))


def test_negative_axes_on_tensors_of_unknown_rank(session: Any) -> None:
    a = tf.placeholder(tf.float32)
    b = tf.placeholder(tf.float32)
    feed = {a: np.ones([2, 3], np.float32), b: np.zeros([2, 1], np.float32)}
    assert session.run(tf.concat([a, b], -1), feed).shape == (2, 4)
    assert session.run(tf.stack([a, a], -1), feed).shape == (2, 3, 2)
    assert session.run(tf.expand_dims(a, -1), feed).shape == (2, 3, 1)
    assert session.run(tf.gather(a, [0, 0], axis=-1), feed).shape == (2, 2)
    assert [v.shape for v in session.run(tf.split(a, 3, axis=-1), feed)] == [(2, 1)] * 3
    grad = tf.gradients(tf.reduce_sum(tf.concat([a, b], -1) * 2.0), [a, b])
    np.testing.assert_array_equal(session.run(grad[1], feed), np.full([2, 1], 2.0))
