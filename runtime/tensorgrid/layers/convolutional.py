"""``tf.layers.conv2d``, ``max_pooling2d`` and ``average_pooling2d`` (and their classes).

The ops take NHWC only; a layer with ``data_format='channels_first'`` transposes its input to
channels last and its output back, so it computes what TensorFlow computes on a GPU (the kernel
keeps TensorFlow's shape, ``[height, width, in_channels, filters]``, in both formats).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.layers import base
from tensorgrid.ops import nn_ops


def _check_rank4(shape: Any, layer_name: str) -> tensor_shape.TensorShape:
    static = tensor_shape.as_shape(shape)
    if static.ndims != 4:
        raise ValueError(f"Input 0 of layer {layer_name} is incompatible with the layer: expected ndim=4, "
                         f"found ndim={static.ndims}. Full shape received: {static}")
    return static


class Conv2D(base.KernelBiasLayer):
    """A 2-D convolution over images: ``activation(conv2d(inputs, kernel) + bias)``."""

    def __init__(self, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "valid",
                 data_format: str = "channels_last", dilation_rate: Any = (1, 1),
                 activation: Optional[Callable[[Any], Any]] = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
                 bias_regularizer: Any = None, activity_regularizer: Any = None, kernel_constraint: Any = None,
                 bias_constraint: Any = None, trainable: bool = True, name: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                         bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint, trainable, name,
                         **kwargs)
        if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
            raise ValueError(f"Invalid value for argument `filters`. Expected a strictly positive value. "
                             f"Received filters={filters!r}.")
        self.filters = filters
        self.kernel_size = base.normalize_tuple(kernel_size, 2, "kernel_size")
        self.strides = base.normalize_tuple(strides, 2, "strides")
        self.padding = base.normalize_padding(padding)
        self.data_format = base.normalize_data_format(data_format)
        self.dilation_rate = base.normalize_tuple(dilation_rate, 2, "dilation_rate")
        if any(s > 1 for s in self.strides) and any(d > 1 for d in self.dilation_rate):
            raise ValueError(f"`strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
                             f"strides={self.strides} and dilation_rate={self.dilation_rate}")

    def build(self, input_shape: Any) -> None:
        shape = _check_rank4(input_shape, self._base_name)
        channels = shape.as_list()[1 if self.data_format == "channels_first" else 3]
        if channels is None:
            raise ValueError(f"The channel dimension of the inputs should be defined. The input_shape received is "
                             f"{shape}, where axis {1 if self.data_format == 'channels_first' else -1} (0-based) "
                             "is the channel dimension, which found to be `None`.")
        self.add_kernel_and_bias([*self.kernel_size, channels, self.filters], self.filters)

    def call(self, inputs: graph_lib.Tensor, **kwargs: Any) -> graph_lib.Tensor:
        base.require_float(inputs, self._base_name)
        x = base.channels_to_last(inputs) if self.data_format == "channels_first" else inputs
        outputs = nn_ops.conv2d(x, self.kernel, strides=[1, *self.strides, 1], padding=self.padding,
                                dilations=[1, *self.dilation_rate, 1], name="Conv2D")
        if self.use_bias:
            outputs = nn_ops.bias_add(outputs, self.bias)
        if self.data_format == "channels_first":
            outputs = base.channels_to_first(outputs)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


def conv2d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate: Any = (1, 1),
           activation: Optional[Callable[[Any], Any]] = None, use_bias: bool = True, kernel_initializer: Any = None,
           bias_initializer: Any = None, kernel_regularizer: Any = None, bias_regularizer: Any = None,
           activity_regularizer: Any = None, kernel_constraint: Any = None, bias_constraint: Any = None,
           trainable: bool = True, name: Optional[str] = None, reuse: Any = None) -> graph_lib.Tensor:
    """``tf.layers.conv2d``: variables ``<scope>/kernel`` (``[kh, kw, in, filters]``) and ``<scope>/bias``."""
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                   dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                   kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                   kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                   activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                   bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name, _reuse=reuse)
    return layer.apply(inputs)


class _Pooling2D(base.Layer):
    """A window of ``pool_size`` moved by ``strides``: MaxPool or AvgPool."""

    _pool: Callable[..., graph_lib.Tensor]
    _op_name: str

    def __init__(self, pool_size: Any, strides: Any, padding: str = "valid", data_format: str = "channels_last",
                 name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.pool_size = base.normalize_tuple(pool_size, 2, "pool_size")
        self.strides = base.normalize_tuple(strides if strides is not None else pool_size, 2, "strides")
        self.padding = base.normalize_padding(padding)
        self.data_format = base.normalize_data_format(data_format)

    def call(self, inputs: graph_lib.Tensor, **kwargs: Any) -> graph_lib.Tensor:
        _check_rank4(inputs.shape, self._base_name)
        x = base.channels_to_last(inputs) if self.data_format == "channels_first" else inputs
        outputs = type(self)._pool(x, ksize=[1, *self.pool_size, 1], strides=[1, *self.strides, 1],
                                   padding=self.padding, name=self._op_name)
        return base.channels_to_first(outputs) if self.data_format == "channels_first" else outputs


class MaxPooling2D(_Pooling2D):
    """The maximum of each window."""

    _pool = staticmethod(nn_ops.max_pool)
    _op_name = "MaxPool"


class AveragePooling2D(_Pooling2D):
    """The mean of each window (of its elements inside the input, with 'same' padding)."""

    _pool = staticmethod(nn_ops.avg_pool)
    _op_name = "AvgPool"


def max_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> graph_lib.Tensor:
    """``tf.layers.max_pooling2d``."""
    return MaxPooling2D(pool_size, strides, padding=padding, data_format=data_format, name=name).apply(inputs)


def average_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> graph_lib.Tensor:
    """``tf.layers.average_pooling2d``."""
    return AveragePooling2D(pool_size, strides, padding=padding, data_format=data_format, name=name).apply(inputs)
