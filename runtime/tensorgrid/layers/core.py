"""``tf.layers.dense``, ``dropout`` and ``flatten`` (and their classes), as TF1's layers compute them."""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Optional

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.layers import base
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_ops
from tensorgrid.ops import op_util


class Dense(base.KernelBiasLayer):
    """``activation(inputs @ kernel + bias)``; inputs of rank above 2 are multiplied along their last axis."""

    def __init__(self, units: int, activation: Optional[Callable[[Any], Any]] = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
                 bias_regularizer: Any = None, activity_regularizer: Any = None, kernel_constraint: Any = None,
                 bias_constraint: Any = None, trainable: bool = True, name: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                         bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint, trainable, name,
                         **kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: "
                             f"units={units!r}")
        self.units = units

    def build(self, input_shape: Any) -> None:
        shape = tensor_shape.as_shape(input_shape)
        if shape.ndims is not None and shape.ndims < 2:
            raise ValueError(f"Input 0 of layer {self._base_name} is incompatible with the layer: expected "
                             f"min_ndim=2, found ndim={shape.ndims}. Full shape received: {shape}")
        last = shape.as_list()[-1] if shape.ndims is not None else None
        if last is None:
            raise ValueError(f"The last dimension of the inputs to `Dense` should be defined. Found `None` "
                             f"(inputs of shape {shape}).")
        self.add_kernel_and_bias([last, self.units], self.units)

    def call(self, inputs: graph_lib.Tensor, **kwargs: Any) -> graph_lib.Tensor:
        base.require_float(inputs, self._base_name)
        rank = inputs.shape.ndims
        if rank == 2:
            outputs = math_ops.matmul(inputs, self.kernel)
        else:
            flat = array_ops.reshape(inputs, [-1, int(self.kernel.shape[0])])
            product = math_ops.matmul(flat, self.kernel)
            outer_shape = indexing_ops.strided_slice_from_key(array_ops.shape(inputs), slice(None, -1))
            outputs = array_ops.reshape(product, array_ops.concat([outer_shape, [self.units]], 0), name="Tensordot")
            if rank is not None:
                outputs.set_shape(inputs.shape.as_list()[:-1] + [self.units])
        if self.use_bias:
            outputs = nn_ops.bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


def dense(inputs: Any, units: int, activation: Optional[Callable[[Any], Any]] = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Any = None,
          bias_regularizer: Any = None, activity_regularizer: Any = None, kernel_constraint: Any = None,
          bias_constraint: Any = None, trainable: bool = True, name: Optional[str] = None,
          reuse: Any = None) -> graph_lib.Tensor:
    """A densely connected layer (``tf.layers.dense``): variables ``<scope>/kernel`` and ``<scope>/bias``."""
    layer = Dense(units, activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
                  bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                  bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                  kernel_constraint=kernel_constraint, bias_constraint=bias_constraint, trainable=trainable,
                  name=name, _scope=name, _reuse=reuse)
    return layer.apply(inputs)


class Dropout(base.Layer):
    """Zeroes each element with probability ``rate`` and scales the rest by ``1 / (1 - rate)``, when training."""

    def __init__(self, rate: Any = 0.5, noise_shape: Any = None, seed: Optional[int] = None,
                 name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if not op_util.is_tensor_like(rate) and not 0 <= float(rate) < 1:
            raise ValueError(f"Invalid value received for argument `rate`. Expected a float value between 0 and 1. "
                             f"Received: rate={rate!r}")
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs: graph_lib.Tensor, training: Any = False, **kwargs: Any) -> graph_lib.Tensor:
        if not op_util.is_tensor_like(self.rate) and float(self.rate) == 0:
            return array_ops.identity(inputs)

        def dropped() -> graph_lib.Tensor:
            return nn_ops.dropout(inputs, noise_shape=self.noise_shape, seed=self.seed, rate=self.rate)

        return base.switch(training, dropped, lambda: array_ops.identity(inputs))  # type: ignore[no-any-return]


def dropout(inputs: Any, rate: Any = 0.5, noise_shape: Any = None, seed: Optional[int] = None, training: Any = False,
            name: Optional[str] = None) -> graph_lib.Tensor:
    """``tf.layers.dropout``: the identity unless ``training`` (a Python bool or a bool tensor) is true."""
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name).apply(inputs, training=training)


class Flatten(base.Layer):
    """``[batch, d1, d2, ...]`` -> ``[batch, d1 * d2 * ...]``."""

    def __init__(self, data_format: Optional[str] = None, name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.data_format = base.normalize_data_format(data_format if data_format is not None else "channels_last")

    def call(self, inputs: graph_lib.Tensor, **kwargs: Any) -> graph_lib.Tensor:
        shape = inputs.shape
        if shape.ndims is None:
            raise ValueError(f"flatten: the rank of {inputs.name} must be known")
        if self.data_format == "channels_first" and shape.ndims > 2:
            inputs = array_ops.transpose(inputs, [0, *range(2, shape.ndims), 1])
            shape = inputs.shape
        if shape.ndims == 1:
            return array_ops.expand_dims(inputs, 1)
        dims = shape.as_list()
        rest = dims[1:]
        if all(d is not None for d in rest):
            target: Any = [-1, functools.reduce(operator.mul, rest, 1)]
        elif dims[0] is not None:
            target = [dims[0], -1]
        else:
            target = array_ops.stack([indexing_ops.strided_slice_from_key(array_ops.shape(inputs), 0), -1])
        return array_ops.reshape(inputs, target)


def flatten(inputs: Any, name: Optional[str] = None, data_format: str = "channels_last") -> graph_lib.Tensor:
    """``tf.layers.flatten``: keeps the batch axis, folds the others into one."""
    return Flatten(data_format=data_format, name=name).apply(inputs)
