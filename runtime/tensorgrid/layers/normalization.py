"""``tf.layers.batch_normalization`` (and ``BatchNormalization``), as TF1's layer computes it.

Training normalizes with the batch's mean and (biased) variance and adds two updates of the
moving statistics to ``tf.GraphKeys.UPDATE_OPS`` (``moving -= (moving - batch) * (1 - momentum)``),
which the program runs with its train op; inference normalizes with the moving statistics. With
``training`` a bool tensor both are built and the tensor picks at run time: the updates then move
the statistics by zero when it is false, as TensorFlow's do.

TensorFlow runs 4-D inputs normalized over axis 1 or 3 through its fused kernel, which changes two
things this layer does too for those inputs: ``epsilon`` is at least 1.001e-5, and the moving
variance moves towards the batch variance with Bessel's correction (``n / (n - 1)``), while the
output is normalized with the biased one.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.layers import base
from tensorgrid.ops import array_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_composites
from tensorgrid.ops import nn_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import state_ops
from tensorgrid.ops import variable_scope as variable_scope_lib

# tf.nn.fused_batch_norm's smallest epsilon (cuDNN's bound), applied to the inputs TensorFlow fuses.
FUSED_MIN_EPSILON = 1.001e-5


class BatchNormalization(base.Layer):
    """Normalizes over every axis but ``axis``; ``gamma``, ``beta`` and the moving statistics per channel."""

    def __init__(self, axis: Any = -1, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True,
                 scale: bool = True, beta_initializer: Any = None, gamma_initializer: Any = None,
                 moving_mean_initializer: Any = None, moving_variance_initializer: Any = None,
                 beta_regularizer: Any = None, gamma_regularizer: Any = None, beta_constraint: Any = None,
                 gamma_constraint: Any = None, renorm: bool = False, renorm_clipping: Any = None,
                 renorm_momentum: float = 0.99, fused: Optional[bool] = None, trainable: bool = True,
                 virtual_batch_size: Optional[int] = None, adjustment: Any = None, name: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(trainable=trainable, name=name, **kwargs)
        for option, value, default in (("renorm", renorm, False), ("renorm_clipping", renorm_clipping, None),
                                       ("virtual_batch_size", virtual_batch_size, None),
                                       ("adjustment", adjustment, None)):
            if value != default:
                raise NotImplementedError(
                    f"batch_normalization: {option}={value!r} is not supported by tensorgrid's tf.layers "
                    "(docs/differences.md, tf.layers); leave it at its default")
        if isinstance(axis, (list, tuple)):
            if not axis or not all(isinstance(a, int) for a in axis):
                raise TypeError(f"Expected an int or a list/tuple of ints for the argument 'axis', but received: {axis!r}")
            self.axis: list[int] = list(axis)
        elif isinstance(axis, int) and not isinstance(axis, bool):
            self.axis = [axis]
        else:
            raise TypeError(f"Expected an int or a list/tuple of ints for the argument 'axis', but received: {axis!r}")
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center = center
        self.scale = scale
        self.beta_initializer = beta_initializer if beta_initializer is not None else init_ops.zeros_initializer()
        self.gamma_initializer = gamma_initializer if gamma_initializer is not None else init_ops.ones_initializer()
        self.moving_mean_initializer = (moving_mean_initializer if moving_mean_initializer is not None
                                        else init_ops.zeros_initializer())
        self.moving_variance_initializer = (moving_variance_initializer if moving_variance_initializer is not None
                                            else init_ops.ones_initializer())
        self.beta_regularizer = beta_regularizer
        self.gamma_regularizer = gamma_regularizer
        self.beta_constraint = beta_constraint
        self.gamma_constraint = gamma_constraint
        self.fused = fused
        self.gamma: Any = None
        self.beta: Any = None
        self.moving_mean: Any = None
        self.moving_variance: Any = None
        self._rank = 0
        self._fused = False

    def build(self, input_shape: Any) -> None:
        shape = tensor_shape.as_shape(input_shape)
        if shape.ndims is None:
            raise ValueError(f"Input has undefined rank. Received: input_shape={shape}.")
        rank = shape.ndims
        axes = []
        for a in self.axis:
            if not -rank <= a < rank:
                raise ValueError(f"Invalid value for `axis` argument. Expected 0 <= axis < inputs.rank (with "
                                 f"inputs.rank={rank}). Received: axis={a}")
            axes.append(a % rank)
        if len(set(axes)) != len(axes):
            raise ValueError(f"Duplicate axis: {self.axis}")
        self.axis = axes
        self._rank = rank
        dims = shape.as_list()
        for a in axes:
            if dims[a] is None:
                raise ValueError(f"Axis {a} of input tensor should have a defined dimension but the layer received "
                                 f"an input with shape {shape}.")
        fusable = (rank == 4 and axes in ([1], [3])
                   and self._dtype in (dtypes.float16, dtypes.float32))
        if self.fused and not fusable:
            raise ValueError(f"batch_normalization: fused=True needs a 4-D float16 or float32 input normalized over "
                             f"axis 1 or 3; got shape {shape}, axis {self.axis}, dtype {self._dtype}")
        self._fused = self.fused is not False and fusable
        if self._fused:
            self.epsilon = max(self.epsilon, FUSED_MIN_EPSILON)
        param_shape = [dims[axes[0]]] if len(axes) == 1 else [dims[i] if i in axes else 1 for i in range(rank)]
        param_dtype = dtypes.float32 if self._dtype == dtypes.float16 else self._dtype
        if self.scale:
            self.gamma = self.add_weight("gamma", param_shape, initializer=self.gamma_initializer,
                                         regularizer=self.gamma_regularizer, constraint=self.gamma_constraint,
                                         dtype=param_dtype)
        if self.center:
            self.beta = self.add_weight("beta", param_shape, initializer=self.beta_initializer,
                                        regularizer=self.beta_regularizer, constraint=self.beta_constraint,
                                        dtype=param_dtype)
        # The moving statistics stay whole under a scope's partitioner (TF's layer turns it off for them):
        # their updates assign the whole variable.
        scope = variable_scope_lib.get_variable_scope()
        partitioner = scope.partitioner
        scope.set_partitioner(None)
        try:
            self.moving_mean = self.add_weight("moving_mean", param_shape, initializer=self.moving_mean_initializer,
                                               trainable=False, dtype=param_dtype)
            self.moving_variance = self.add_weight("moving_variance", param_shape,
                                                   initializer=self.moving_variance_initializer, trainable=False,
                                                   dtype=param_dtype)
        finally:
            scope.set_partitioner(partitioner)

    def _broadcast(self, value: Any) -> Any:
        """A per-channel value shaped to broadcast against the input (only needed when the axis is not last)."""
        if value is None or len(self.axis) > 1 or self.axis == [self._rank - 1]:
            return value
        shape = [1] * self._rank
        shape[self.axis[0]] = -1
        return array_ops.reshape(value, shape)

    def _moving_average_update(self, variable: Any, value: graph_lib.Tensor) -> graph_lib.Tensor:
        graph = op_util.graph_of(value)
        with graph.name_scope("AssignMovingAvg") as scope, graph.colocate_with(variable.op):
            decay = op_util.to_tensor(1.0 - self.momentum, dtype=variable.dtype.base_dtype, name="decay")
            delta = math_ops.multiply(math_ops.subtract(variable, value), decay)
            return state_ops.assign_sub(variable, delta, name=scope)

    def call(self, inputs: graph_lib.Tensor, training: Any = False, **kwargs: Any) -> graph_lib.Tensor:
        base.require_float(inputs, self._base_name)
        training_value = base.static_training(training)
        if training_value is False:
            mean: Any = self.moving_mean
            variance: Any = self.moving_variance
        else:
            reduction_axes = [i for i in range(self._rank) if i not in self.axis]
            batch_mean, batch_variance = nn_ops.moments(math_ops.cast(inputs, self.moving_mean.dtype.base_dtype),
                                                        reduction_axes, keep_dims=len(self.axis) > 1)
            moving_mean, moving_variance = self.moving_mean, self.moving_variance
            mean = base.switch(training, lambda: batch_mean, lambda: array_ops.identity(moving_mean))
            variance = base.switch(training, lambda: batch_variance, lambda: array_ops.identity(moving_variance))
            if self._fused:
                # TensorFlow's fused kernel gives the batch variance with Bessel's correction, and the
                # layer moves its moving variance towards that one.
                sample_size = math_ops.cast(math_ops.truediv(array_ops.size(inputs), array_ops.size(batch_variance)),
                                            batch_variance.dtype.base_dtype)
                unbiased = math_ops.multiply(batch_variance,
                                             math_ops.truediv(sample_size, math_ops.subtract(sample_size, 1.0)))
                update_variance = base.switch(training, lambda: unbiased,
                                              lambda: array_ops.identity(moving_variance))
            else:
                update_variance = variance
            self.add_update(self._moving_average_update(self.moving_mean, mean))
            self.add_update(self._moving_average_update(self.moving_variance, update_variance))
        dtype = inputs.dtype.base_dtype
        mean = math_ops.cast(mean, dtype)
        variance = math_ops.cast(variance, dtype)
        offset = math_ops.cast(self.beta, dtype) if self.beta is not None else None
        scale = math_ops.cast(self.gamma, dtype) if self.gamma is not None else None
        return nn_composites.batch_normalization(
            inputs, self._broadcast(mean), self._broadcast(variance), self._broadcast(offset),
            self._broadcast(scale), self.epsilon)


def batch_normalization(inputs: Any, axis: Any = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                        center: bool = True, scale: bool = True, beta_initializer: Any = None,
                        gamma_initializer: Any = None, moving_mean_initializer: Any = None,
                        moving_variance_initializer: Any = None, beta_regularizer: Any = None,
                        gamma_regularizer: Any = None, beta_constraint: Any = None, gamma_constraint: Any = None,
                        training: Any = False, trainable: bool = True, name: Optional[str] = None, reuse: Any = None,
                        renorm: bool = False, renorm_clipping: Any = None, renorm_momentum: float = 0.99,
                        fused: Optional[bool] = None, virtual_batch_size: Optional[int] = None,
                        adjustment: Any = None) -> graph_lib.Tensor:
    """``tf.layers.batch_normalization``: variables ``<scope>/gamma``, ``beta``, ``moving_mean`` and
    ``moving_variance`` (the last two not trainable); with ``training`` its two updates are in UPDATE_OPS."""
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer, moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer, beta_constraint=beta_constraint,
        gamma_constraint=gamma_constraint, renorm=renorm, renorm_clipping=renorm_clipping,
        renorm_momentum=renorm_momentum, fused=fused, trainable=trainable, virtual_batch_size=virtual_batch_size,
        adjustment=adjustment, name=name, _scope=name, _reuse=reuse)
    return layer.apply(inputs, training=training)
