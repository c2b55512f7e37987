"""Neural-network ops (``tf.nn``): activations, softmax and cross-entropy, bias_add,
dropout, conv2d and pooling (NHWC, SAME/VALID), in_top_k, moments, l2_loss.

Each op's constructor checks shapes while the graph is built (naming the tensors
and the valid values) and its gradient rule sits right below it. Ops that are
cheap compositions (relu6, dropout, moments, l2_loss) are built from other ops and
need no kernel of their own.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.kernels import nn_kernels
from tensorgrid.ops import array_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import random_ops

for _op_type in ("Relu", "ReluGrad", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
                 "SoftmaxCrossEntropyWithLogits", "BiasAdd", "BiasAddGrad", "Conv2D", "Conv2DBackpropInput",
                 "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad", "InTopK"):
    op_registry.register_op(_op_type)


def _scope(name: Optional[str], default: str, *values: Any) -> Any:
    return op_util.graph_of(*values).name_scope(name or default)


# ---------------------------------------------------------------- activations

def relu(features: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """max(features, 0)."""
    x = op_util.to_tensor(features)
    op_util.check_dtype_in("Relu", x, op_util.NUMBERS)
    return op_util.make_tensor("Relu", [x], x.dtype.base_dtype, x.shape, name or "Relu")


@op_registry.RegisterGradient("Relu")
def _relu_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [_relu_grad_op(grad, op.outputs[0])]


def _relu_grad_op(grad: graph_lib.Tensor, features: graph_lib.Tensor) -> graph_lib.Tensor:
    return op_util.make_tensor("ReluGrad", [grad, features], grad.dtype.base_dtype, features.shape, "ReluGrad")


@op_registry.RegisterGradient("ReluGrad")
def _relu_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [_relu_grad_op(grad, op.inputs[1]), array_ops.zeros_like(op.inputs[1])]


def relu6(features: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """min(max(features, 0), 6)."""
    x = op_util.to_tensor(features)
    with _scope(name, "Relu6", x):
        return math_ops.minimum(relu(x), 6)


def leaky_relu(features: Any, alpha: float = 0.2, name: Optional[str] = None) -> graph_lib.Tensor:
    """features where positive, else alpha * features."""
    x = op_util.to_tensor(features)
    with _scope(name, "LeakyRelu", x):
        return math_ops.maximum(math_ops.multiply(x, alpha), x)


# ---------------------------------------------------------------- softmax

def _softmax_axis(x: graph_lib.Tensor, axis: Any, dim: Any, op_name: str) -> int:
    if axis is not None and dim is not None:
        raise ValueError(f"{op_name}: pass either axis or dim, not both")
    chosen = -1 if axis is None and dim is None else int(axis if axis is not None else dim)
    rank = x.shape.ndims
    if rank == 0:
        raise ValueError(f"{op_name}: logits {x.name} must have rank >= 1, got a scalar")
    if rank is None:
        return chosen
    if not -rank <= chosen < rank:
        raise ValueError(f"{op_name}: axis {chosen} is out of range for {x.name} with shape {x.shape}")
    return chosen % rank


def softmax(logits: Any, axis: Any = None, name: Optional[str] = None, dim: Any = None) -> graph_lib.Tensor:
    """exp(logits) / sum(exp(logits), axis), computed stably (the max is subtracted first)."""
    x = op_util.to_tensor(logits)
    op_util.check_dtype_in("Softmax", x, op_util.FLOATS)
    axis_int = _softmax_axis(x, axis, dim, "softmax")
    return op_util.make_tensor("Softmax", [x], x.dtype.base_dtype, x.shape, name or "Softmax", {"axis": axis_int})


@op_registry.RegisterGradient("Softmax")
def _softmax_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    y = op.outputs[0]
    inner = math_ops.reduce_sum(math_ops.multiply(grad, y), axis=op.get_attr("axis"), keepdims=True)
    return [math_ops.multiply(math_ops.subtract(grad, inner), y)]


def log_softmax(logits: Any, axis: Any = None, name: Optional[str] = None, dim: Any = None) -> graph_lib.Tensor:
    """logits - log(sum(exp(logits), axis)), computed stably."""
    x = op_util.to_tensor(logits)
    op_util.check_dtype_in("LogSoftmax", x, op_util.FLOATS)
    axis_int = _softmax_axis(x, axis, dim, "log_softmax")
    return op_util.make_tensor("LogSoftmax", [x], x.dtype.base_dtype, x.shape, name or "LogSoftmax", {"axis": axis_int})


@op_registry.RegisterGradient("LogSoftmax")
def _log_softmax_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    y = op.outputs[0]
    total = math_ops.reduce_sum(grad, axis=op.get_attr("axis"), keepdims=True)
    return [math_ops.subtract(grad, math_ops.multiply(math_ops.exp(y), total))]


# ---------------------------------------------------------------- cross-entropy

def _require_named(sentinel: Any, fn_name: str) -> None:
    if sentinel is not None:
        raise ValueError(f"Only call `{fn_name}` with named arguments (labels=..., logits=..., ...)")


def sparse_softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None, logits: Any = None,
                                             name: Optional[str] = None) -> graph_lib.Tensor:
    """Per-example -log(softmax(logits)[label]); labels are class indices in [0, num_classes)."""
    _require_named(_sentinel, "sparse_softmax_cross_entropy_with_logits")
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs both labels= and logits=")
    x = op_util.to_tensor(logits)
    y = op_util.to_tensor(labels, dtype=None if op_util.is_tensor_like(labels) else dtypes.int32)
    op_util.check_dtype_in("SparseSoftmaxCrossEntropyWithLogits", x, op_util.FLOATS)
    if y.dtype.base_dtype not in op_util.INDICES:
        raise TypeError(
            f"sparse_softmax_cross_entropy_with_logits: labels {y.name} must be int32 or int64 class indices, "
            f"got {y.dtype.base_dtype.name} (for one-hot or probability labels use softmax_cross_entropy_with_logits)"
        )
    if x.shape.ndims == 0:
        raise ValueError(f"sparse_softmax_cross_entropy_with_logits: logits {x.name} must have rank >= 1")
    if x.shape.ndims is not None and y.shape.ndims is not None:
        if y.shape.ndims != x.shape.ndims - 1 or not y.shape.is_compatible_with(x.shape[:-1]):
            raise ValueError(
                f"sparse_softmax_cross_entropy_with_logits: labels {y.name} with shape {y.shape} must have the "
                f"shape of logits {x.name} with shape {x.shape} without its last dimension ({x.shape[:-1]})"
            )
    # Labels out of [0, num_classes) fail when the op runs (InvalidArgumentError naming the label), even
    # when they are constants, as in TensorFlow: a graph that never runs the loss still builds.
    batch_shape = x.shape[:-1] if x.shape.ndims is not None else y.shape
    op = op_util.make_op("SparseSoftmaxCrossEntropyWithLogits", [x, y],
                         [(x.dtype.base_dtype, batch_shape), (x.dtype.base_dtype, x.shape)],
                         name or "SparseSoftmaxCrossEntropyWithLogits")
    return op.outputs[0]


@op_registry.RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(op: graph_lib.Operation, grad_loss: Any, grad_backprop: Any) -> list[Any]:
    return [math_ops.multiply(array_ops.expand_dims(grad_loss, -1), op.outputs[1]), None]


def _softmax_xent(labels: Any, logits: Any, axis: Any, name: Optional[str], stop_label_gradient: bool,
                  fn_name: str) -> graph_lib.Tensor:
    if labels is None or logits is None:
        raise ValueError(f"{fn_name} needs both labels= and logits=")
    x = op_util.to_tensor(logits)
    y = op_util.to_tensor(labels, dtype=None if op_util.is_tensor_like(labels) else x.dtype.base_dtype)
    op_util.check_dtype_in("SoftmaxCrossEntropyWithLogits", x, op_util.FLOATS)
    if y.dtype.base_dtype != x.dtype.base_dtype:
        raise TypeError(
            f"{fn_name}: labels {y.name} ({y.dtype.base_dtype.name}) must have the dtype of logits {x.name} "
            f"({x.dtype.base_dtype.name}); for class indices use sparse_softmax_cross_entropy_with_logits"
        )
    if not x.shape.is_compatible_with(y.shape):
        raise ValueError(f"{fn_name}: labels {y.name} with shape {y.shape} and logits {x.name} with shape "
                         f"{x.shape} must have the same shape")
    axis_int = _softmax_axis(x, axis, None, fn_name)
    with _scope(name, "softmax_cross_entropy_with_logits", x, y):
        if stop_label_gradient:
            y = array_ops.stop_gradient(y)
        rank = x.shape.ndims
        if rank is not None and axis_int != rank - 1:
            order = [i for i in range(rank) if i != axis_int] + [axis_int]
            x, y = array_ops.transpose(x, order), array_ops.transpose(y, order)
        elif rank is None and axis_int != -1:
            raise ValueError(f"{fn_name}: axis {axis_int} needs logits of known rank")
        shape = x.shape.merge_with(y.shape)
        op = op_util.make_op("SoftmaxCrossEntropyWithLogits", [x, y],
                             [(x.dtype.base_dtype, shape[:-1]), (x.dtype.base_dtype, shape)],
                             "SoftmaxCrossEntropyWithLogits")
        return op.outputs[0]


def softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None, logits: Any = None, dim: int = -1,
                                      name: Optional[str] = None, axis: Any = None) -> graph_lib.Tensor:
    """Per-example -sum(labels * log_softmax(logits)); as in TF1, no gradient flows into labels."""
    _require_named(_sentinel, "softmax_cross_entropy_with_logits")
    return _softmax_xent(labels, logits, axis if axis is not None else dim, name, True,
                         "softmax_cross_entropy_with_logits")


def softmax_cross_entropy_with_logits_v2(_sentinel: Any = None, labels: Any = None, logits: Any = None,
                                         dim: int = -1, name: Optional[str] = None, axis: Any = None) -> graph_lib.Tensor:
    """As ``softmax_cross_entropy_with_logits``, but gradients also flow into labels."""
    _require_named(_sentinel, "softmax_cross_entropy_with_logits_v2")
    return _softmax_xent(labels, logits, axis if axis is not None else dim, name, False,
                         "softmax_cross_entropy_with_logits_v2")


@op_registry.RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(op: graph_lib.Operation, grad_loss: Any, grad_backprop: Any) -> list[Any]:
    g = array_ops.expand_dims(grad_loss, -1)
    logits = op.inputs[0]
    return [math_ops.multiply(g, op.outputs[1]), math_ops.multiply(g, math_ops.negative(log_softmax(logits)))]


# ---------------------------------------------------------------- bias_add

def bias_add(value: Any, bias: Any, data_format: Optional[str] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """value + bias along the channel dimension (the last one in NHWC, dimension 1 in NCHW)."""
    x = op_util.to_tensor(value)
    b = op_util.to_tensor(bias, dtype=None if op_util.is_tensor_like(bias) else x.dtype.base_dtype)
    dtype = op_util.check_same_dtype("BiasAdd", x, b)
    fmt = _bias_format(data_format)
    if b.shape.ndims not in (None, 1):
        raise ValueError(f"bias_add: bias {b.name} must be a vector, got shape {b.shape}")
    rank = x.shape.ndims
    if rank is not None:
        if rank < 2:
            raise ValueError(f"bias_add: value {x.name} must have rank >= 2, got shape {x.shape}")
        channels = x.shape[1 if fmt == "NCHW" else rank - 1]
        if not channels.is_compatible_with(b.shape.with_rank(1)[0]):
            raise ValueError(
                f"bias_add: bias {b.name} with shape {b.shape} must match the channel dimension ({channels}) "
                f"of value {x.name} with shape {x.shape} ({fmt})"
            )
    return op_util.make_tensor("BiasAdd", [x, b], dtype, x.shape, name or "BiasAdd", {"data_format": fmt})


def _bias_format(data_format: Optional[str]) -> str:
    if data_format in (None, "NHWC", "N...C"):
        return "NHWC"
    if data_format in ("NCHW", "NC..."):
        return "NCHW"
    raise ValueError(f'bias_add: data_format must be "NHWC" or "NCHW", got {data_format!r}')


@op_registry.RegisterGradient("BiasAdd")
def _bias_add_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    b = op.inputs[1]
    db = op_util.make_tensor("BiasAddGrad", [grad], grad.dtype.base_dtype, b.shape, "BiasAddGrad",
                             {"data_format": op.get_attr("data_format")})
    return [grad, db]


@op_registry.RegisterGradient("BiasAddGrad")
def _bias_add_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [bias_add(array_ops.zeros_like(op.inputs[0]), grad, data_format=op.get_attr("data_format"))]


def xw_plus_b(x: Any, weights: Any, biases: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """matmul(x, weights) + biases."""
    with _scope(name, "xw_plus_b", x, weights, biases):
        return bias_add(math_ops.matmul(x, weights), biases)


# ---------------------------------------------------------------- dropout

def dropout(x: Any, keep_prob: Any = None, noise_shape: Any = None, seed: Optional[int] = None,
            name: Optional[str] = None, rate: Any = None) -> graph_lib.Tensor:
    """Keeps each element with probability ``keep_prob`` (scaled by 1/keep_prob), else zeroes it.

    As in TF1, ``keep_prob`` may be a tensor (a placeholder fed 1.0 at evaluation),
    and ``rate`` (the drop probability) may be given instead of it.
    """
    if keep_prob is not None and rate is not None:
        raise ValueError("dropout: pass either keep_prob or rate, not both")
    if keep_prob is None and rate is None:
        raise ValueError("dropout: keep_prob (or rate) is required")
    t = op_util.to_tensor(x)
    op_util.check_dtype_in("dropout", t, op_util.FLOATS)
    dt = t.dtype.base_dtype
    given = keep_prob if keep_prob is not None else rate
    if not op_util.is_tensor_like(given):
        value = float(given)
        keep = value if keep_prob is not None else 1 - value
        if not 0 < keep <= 1:
            what = f"keep_prob={value}" if keep_prob is not None else f"rate={value}"
            raise ValueError(f"dropout: {what} must keep a fraction of elements in (0, 1]")
        if keep == 1:
            return t
    with _scope(name, "dropout", t):
        keep_t = op_util.to_tensor(given, dtype=dt if not op_util.is_tensor_like(given) else None)
        if keep_t.dtype.base_dtype != dt:
            raise TypeError(f"dropout: keep_prob/rate {keep_t.name} must have the dtype of x ({dt.name})")
        if keep_prob is None:
            keep_t = math_ops.subtract(op_util.to_tensor(1, dtype=dt), keep_t)
        shape = array_ops.shape(t) if noise_shape is None else noise_shape
        uniform = random_ops.random_uniform(shape, seed=seed, dtype=dt)
        kept = math_ops.floor(math_ops.add(keep_t, uniform))
        result = math_ops.multiply(math_ops.truediv(t, keep_t), kept)
    if noise_shape is None:
        result.set_shape(t.shape)
    return result


# ---------------------------------------------------------------- conv2d and pooling

def _four(value: Any, what: str, op_name: str) -> tuple[int, int, int, int]:
    """An int, [h, w] or [1, h, w, 1] as the 4-element NHWC form; batch and channel entries must be 1."""
    if value is None:
        raise ValueError(f"{op_name}: {what} is required")
    items = [int(value)] if isinstance(value, (int, np.integer)) else [int(v) for v in value]
    if len(items) == 1:
        items = [1, items[0], items[0], 1]
    elif len(items) == 2:
        items = [1, items[0], items[1], 1]
    if len(items) != 4:
        raise ValueError(f"{op_name}: {what} must be an int or a list of 1, 2 or 4 ints, got {value!r}")
    if items[0] != 1 or items[3] != 1:
        raise ValueError(f"{op_name}: {what} {items} must be 1 in the batch and channel dimensions (NHWC)")
    if any(v < 1 for v in items):
        raise ValueError(f"{op_name}: {what} must be positive, got {items}")
    return items[0], items[1], items[2], items[3]


def _padding(padding: Any, op_name: str) -> str:
    text = padding.decode() if isinstance(padding, bytes) else padding
    if not isinstance(text, str) or text.upper() not in ("SAME", "VALID"):
        raise ValueError(f'{op_name}: padding must be "SAME" or "VALID", got {padding!r}')
    return text.upper()


def _nhwc_only(data_format: Any, op_name: str) -> None:
    if data_format not in (None, "NHWC"):
        raise ValueError(
            f'{op_name} supports data_format="NHWC" only, got {data_format!r}; transpose NCHW input with '
            "tf.transpose(x, [0, 2, 3, 1])"
        )


def _spatial_output(in_shape: tensor_shape.TensorShape, window: Sequence[Optional[int]], attrs: dict[str, Any],
                    op_name: str, what: str) -> list[Optional[int]]:
    dims = in_shape.as_list()
    dilations = attrs.get("dilations") or (1, 1, 1, 1)
    out: list[Optional[int]] = []
    for axis in (1, 2):
        size, extent = dims[axis], window[axis - 1]
        if size is None or extent is None:
            out.append(None)
            continue
        effective = (extent - 1) * dilations[axis] + 1
        if attrs["padding"] == "VALID" and size < effective:
            raise ValueError(
                f"{op_name}: {what} with shape {in_shape} is smaller than the window ({effective} along "
                f"dimension {axis}) with VALID padding: the output size would be negative"
            )
        out.append(nn_kernels.window_geometry(size, extent, attrs["strides"][axis], dilations[axis],
                                              attrs["padding"]).output)
    return out


def _conv_attrs(strides: Any, padding: Any, dilations: Any, data_format: Any, op_name: str) -> dict[str, Any]:
    _nhwc_only(data_format, op_name)
    return {"strides": _four(strides, "strides", op_name), "padding": _padding(padding, op_name),
            "dilations": _four(dilations if dilations is not None else 1, "dilations", op_name),
            "data_format": "NHWC"}


def _rank4(t: graph_lib.Tensor, op_name: str, what: str) -> tensor_shape.TensorShape:
    if t.shape.ndims not in (None, 4):
        raise ValueError(f"{op_name}: {what} {t.name} must be 4-dimensional, got shape {t.shape}")
    return t.shape.with_rank(4)


def conv2d(input: Any, filter: Any = None, strides: Any = None, padding: Any = None,  # noqa: A002
           use_cudnn_on_gpu: bool = True, data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1),
           name: Optional[str] = None, filters: Any = None) -> graph_lib.Tensor:
    """2-D convolution of NHWC ``input`` with a [height, width, in_channels, out_channels] filter."""
    if filter is None:
        filter = filters  # noqa: A001 - TF's argument name
    elif filters is not None:
        raise ValueError("conv2d: pass either filter or filters, not both")
    x = op_util.to_tensor(input)
    w = op_util.to_tensor(filter, dtype=None if op_util.is_tensor_like(filter) else x.dtype.base_dtype)
    dtype = op_util.check_same_dtype("Conv2D", x, w)
    op_util.check_dtype_in("Conv2D", x, op_util.FLOATS)
    attrs = _conv_attrs(strides, padding, dilations, data_format, "conv2d")
    xs, ws = _rank4(x, "conv2d", "input"), _rank4(w, "conv2d", "filter")
    if not xs[3].is_compatible_with(ws[2]):
        raise ValueError(
            f"conv2d: input {x.name} with shape {x.shape} has {xs[3]} channels but filter {w.name} with shape "
            f"{w.shape} expects {ws[2]} (filter is [height, width, in_channels, out_channels])"
        )
    spatial = _spatial_output(xs, ws.as_list()[:2], attrs, "conv2d", f"input {x.name}")
    shape = [xs[0].value, *spatial, ws[3].value]
    return op_util.make_tensor("Conv2D", [x, w], dtype, shape, name or "Conv2D", attrs)


def conv2d_backprop_input(input_sizes: Any, filter: Any = None, out_backprop: Any = None, strides: Any = None,  # noqa: A002
                          padding: Any = None, use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                          dilations: Any = (1, 1, 1, 1), name: Optional[str] = None,
                          filters: Any = None) -> graph_lib.Tensor:
    """The gradient of conv2d with respect to its input, of shape ``input_sizes``."""
    w = op_util.to_tensor(filter if filter is not None else filters)
    g = op_util.to_tensor(out_backprop)
    dtype = op_util.check_same_dtype("Conv2DBackpropInput", w, g)
    sizes = op_util.index_tensor(input_sizes, "Conv2DBackpropInput")
    attrs = _conv_attrs(strides, padding, dilations, data_format, "conv2d_backprop_input")
    _rank4(w, "conv2d_backprop_input", "filter")
    _rank4(g, "conv2d_backprop_input", "out_backprop")
    shape = array_ops.shape_from_tensor_value(sizes)
    return op_util.make_tensor("Conv2DBackpropInput", [sizes, w, g], dtype, shape, name or "Conv2DBackpropInput", attrs)


def conv2d_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any, strides: Any = None,  # noqa: A002
                           padding: Any = None, use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                           dilations: Any = (1, 1, 1, 1), name: Optional[str] = None) -> graph_lib.Tensor:
    """The gradient of conv2d with respect to its filter, of shape ``filter_sizes``."""
    x = op_util.to_tensor(input)
    g = op_util.to_tensor(out_backprop)
    dtype = op_util.check_same_dtype("Conv2DBackpropFilter", x, g)
    sizes = op_util.index_tensor(filter_sizes, "Conv2DBackpropFilter")
    attrs = _conv_attrs(strides, padding, dilations, data_format, "conv2d_backprop_filter")
    _rank4(x, "conv2d_backprop_filter", "input")
    _rank4(g, "conv2d_backprop_filter", "out_backprop")
    shape = array_ops.shape_from_tensor_value(sizes)
    return op_util.make_tensor("Conv2DBackpropFilter", [x, sizes, g], dtype, shape, name or "Conv2DBackpropFilter",
                               attrs)


def _attrs_of(op: graph_lib.Operation) -> dict[str, Any]:
    return {"strides": op.get_attr("strides"), "padding": op.get_attr("padding"),
            "dilations": op.get_attr("dilations")}


@op_registry.RegisterGradient("Conv2D")
def _conv2d_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, w = op.inputs
    attrs = _attrs_of(op)
    return [conv2d_backprop_input(array_ops.shape(x), w, grad, **attrs),
            conv2d_backprop_filter(x, array_ops.shape(w), grad, **attrs)]


@op_registry.RegisterGradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    _, w, out_backprop = op.inputs
    attrs = _attrs_of(op)
    return [None, conv2d_backprop_filter(grad, array_ops.shape(w), out_backprop, **attrs),
            conv2d(grad, w, **attrs)]


@op_registry.RegisterGradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, _, out_backprop = op.inputs
    attrs = _attrs_of(op)
    return [conv2d_backprop_input(array_ops.shape(x), grad, out_backprop, **attrs), None,
            conv2d(x, grad, **attrs)]


def _pool(op_type: str, value: Any, ksize: Any, strides: Any, padding: Any, data_format: Any,
          name: Optional[str], fn_name: str) -> graph_lib.Tensor:
    x = op_util.to_tensor(value)
    op_util.check_dtype_in(op_type, x, op_util.FLOATS)
    _nhwc_only(data_format, fn_name)
    attrs: dict[str, Any] = {"ksize": _four(ksize, "ksize", fn_name), "strides": _four(strides, "strides", fn_name),
             "padding": _padding(padding, fn_name), "data_format": "NHWC"}
    xs = _rank4(x, fn_name, "value")
    spatial = _spatial_output(xs, attrs["ksize"][1:3], attrs, fn_name, f"value {x.name}")
    return op_util.make_tensor(op_type, [x], x.dtype.base_dtype, [xs[0].value, *spatial, xs[3].value],
                               name or op_type, attrs)


def _pool_attrs(op: graph_lib.Operation) -> dict[str, Any]:
    """The window attributes of a pooling op (not its placement attributes such as ``_class``)."""
    return {name: op.get_attr(name) for name in ("ksize", "strides", "padding", "data_format")}


def max_pool(value: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC",
             name: Optional[str] = None, input: Any = None) -> graph_lib.Tensor:  # noqa: A002
    """The maximum of each window; padded positions never win (SAME pads with -inf)."""
    return _pool("MaxPool", value if value is not None else input, ksize, strides, padding, data_format, name,
                 "max_pool")


@op_registry.RegisterGradient("MaxPool")
def _max_pool_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs[0], op.outputs[0]
    return [op_util.make_tensor("MaxPoolGrad", [x, y, grad], grad.dtype.base_dtype, x.shape, "MaxPoolGrad",
                                _pool_attrs(op))]


@op_registry.RegisterGradient("MaxPoolGrad")
def _max_pool_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    # MaxPoolGrad is linear in the pooled gradient: its own gradient reads ``grad`` at the
    # first maximum of each window (TF's MaxPoolGradGrad); the pooled values get none.
    x, y = op.inputs[0], op.inputs[1]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y),
            op_util.make_tensor("MaxPoolGradGrad", [x, y, grad], grad.dtype.base_dtype, y.shape, "MaxPoolGradGrad",
                                _pool_attrs(op))]


@op_registry.RegisterGradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs[0], op.inputs[1]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y),
            op_util.make_tensor("MaxPoolGrad", [x, y, grad], grad.dtype.base_dtype, x.shape, "MaxPoolGrad",
                                _pool_attrs(op))]


def avg_pool(value: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC",
             name: Optional[str] = None, input: Any = None) -> graph_lib.Tensor:  # noqa: A002
    """The mean of each window over its unpadded elements (as TensorFlow's SAME average pooling)."""
    return _pool("AvgPool", value if value is not None else input, ksize, strides, padding, data_format, name,
                 "avg_pool")


@op_registry.RegisterGradient("AvgPool")
def _avg_pool_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x = op.inputs[0]
    return [op_util.make_tensor("AvgPoolGrad", [array_ops.shape(x), grad], grad.dtype.base_dtype, x.shape,
                                "AvgPoolGrad", _pool_attrs(op))]


@op_registry.RegisterGradient("AvgPoolGrad")
def _avg_pool_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    attrs = _pool_attrs(op)
    return [None, _pool("AvgPool", grad, attrs["ksize"], attrs["strides"], attrs["padding"], "NHWC", None, "avg_pool")]


# ---------------------------------------------------------------- evaluation and statistics

def in_top_k(predictions: Any, targets: Any, k: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """Whether each target class is among the ``k`` highest predictions (ties count as in)."""
    p = op_util.to_tensor(predictions)
    t = op_util.index_tensor(targets, "InTopK")
    op_util.check_dtype_in("InTopK", p, op_util.FLOATS)
    if p.shape.ndims not in (None, 2):
        raise ValueError(f"in_top_k: predictions {p.name} must be [batch, classes], got shape {p.shape}")
    if t.shape.ndims not in (None, 1) or not t.shape.with_rank(1)[0].is_compatible_with(p.shape.with_rank(2)[0]):
        raise ValueError(
            f"in_top_k: targets {t.name} with shape {t.shape} must be a vector over the batch of predictions "
            f"{p.name} with shape {p.shape}"
        )
    k_int = op_util.static_int(k, "in_top_k", "k")
    return op_util.make_tensor("InTopK", [p, t], dtypes.bool_, p.shape.with_rank(2)[:1], name or "InTopK",
                               {"k": k_int})


op_registry.NotDifferentiable("InTopK")


def moments(x: Any, axes: Any, shift: Any = None, name: Optional[str] = None, keep_dims: Optional[bool] = None,
            keepdims: Optional[bool] = None) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
    """(mean, variance) of ``x`` over ``axes``."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    t = op_util.to_tensor(x)
    with _scope(name, "moments", t):
        mean = math_ops.reduce_mean(t, axes, keepdims=True, name="mean")
        variance = math_ops.reduce_mean(
            math_ops.squared_difference(t, array_ops.stop_gradient(mean)), axes, keepdims=True, name="variance"
        )
        if not keep:
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
    return mean, variance


def l2_loss(t: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """sum(t ** 2) / 2."""
    x = op_util.to_tensor(t)
    with _scope(name, "L2Loss", x):
        return math_ops.multiply(math_ops.reduce_sum(math_ops.square(x)), 0.5)
