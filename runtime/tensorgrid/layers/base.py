"""The machinery every ``tf.layers`` layer shares, as TF1's legacy layers behave.

A layer owns one variable scope, named as TensorFlow names it: a layer given ``name``
opens ``variable_scope(name)`` when it is made (so a second layer of that name shares its
variables only with ``reuse=True``); an unnamed one opens a unique scope after its class
(``dense``, ``dense_1``, ...) on its first call, or re-enters ``dense`` itself when made with
``reuse``. Its variables come from ``tf.get_variable`` in that scope (so scope initializers,
``reuse``, regularizers into REGULARIZATION_LOSSES and replica_device_setter all apply), and
its ops are named under the scope's name scope. Variables are made on the first call; later
calls of the same layer object reuse them. Updates a layer makes (batch normalization's moving
averages) go into ``tf.GraphKeys.UPDATE_OPS``.

Also here: the argument checks the layers share (tuples of ints, padding, data format) with
TensorFlow's error messages, and the ``training`` switch (a Python bool or a bool tensor).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import cond_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import variable_scope as variable_scope_lib
from tensorgrid.ops import variables as variables_lib


def _snake_case(class_name: str) -> str:
    """``Conv2D`` -> ``conv2d``, ``MaxPooling2D`` -> ``max_pooling2d``, as Keras names layers."""
    intermediate = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", class_name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", intermediate).lower()


class Layer:
    """A TF1 layer (``tf.layers.Layer``): variables in its own variable scope, made on the first call."""

    def __init__(self, trainable: bool = True, name: Optional[str] = None, dtype: Any = None,
                 activity_regularizer: Optional[Callable[[Any], Any]] = None, _scope: Any = None,
                 _reuse: Any = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}: name must be a string, got {name!r}")
        if _reuse not in (None, True, False, variable_scope_lib.AUTO_REUSE):
            raise ValueError(f"reuse must be True, False, None or tf.AUTO_REUSE, got {_reuse!r}")
        self.trainable = bool(trainable)
        self.built = False
        self.activity_regularizer = activity_regularizer
        self._base_name = name or _snake_case(type(self).__name__)
        self.name = self._base_name
        self._dtype = dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
        self._reuse = _reuse
        self._trainable_weights: list[variables_lib.Variable] = []
        self._non_trainable_weights: list[variables_lib.Variable] = []
        self._updates: list[Any] = []
        self._losses: list[graph_lib.Tensor] = []
        self._scope: Optional[variable_scope_lib.VariableScope] = None
        if _scope:
            with variable_scope_lib.variable_scope(_scope) as captured:
                self._scope = captured

    # -- what a layer holds
    @property
    def dtype(self) -> Optional[dtypes.DType]:
        return self._dtype

    @property
    def scope_name(self) -> str:
        if self._scope is None:
            raise ValueError(f"No name available for layer scope because the layer {self._base_name!r} has not "
                             "been used yet. The scope name is determined the first time the layer instance is "
                             "called. You must therefore call the layer before querying `scope_name`.")
        return self._scope.name

    @property
    def trainable_weights(self) -> list[variables_lib.Variable]:
        return list(self._trainable_weights)

    @property
    def non_trainable_weights(self) -> list[variables_lib.Variable]:
        return list(self._non_trainable_weights)

    @property
    def weights(self) -> list[variables_lib.Variable]:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def updates(self) -> list[Any]:
        return list(self._updates)

    @property
    def losses(self) -> list[graph_lib.Tensor]:
        return list(self._losses)

    # -- what subclasses call
    def add_weight(self, name: str, shape: Any, initializer: Any = None, regularizer: Any = None,
                   trainable: bool = True, constraint: Any = None, dtype: Any = None) -> Any:
        """``tf.get_variable(name, ...)`` in this layer's scope; its regularizer's loss goes into
        REGULARIZATION_LOSSES (once, when the variable is made) and into ``self.losses``.

        Under a scope's partitioner the weight is a ``PartitionedVariable`` (the ops take its parts
        concatenated) and the regularizer applies to each part, as in TensorFlow. TF's legacy layers
        then file the parts under ``non_trainable_weights`` even when they train (its check that a
        new weight is in ``trainable_variables()`` fails for the partitioned whole, so it moves them);
        the graph's TRAINABLE_VARIABLES holds them all the same, and tensorgrid keeps TF's lists."""
        graph = graph_lib.get_default_graph()
        known = len(graph.get_collection(graph_lib.GraphKeys.REGULARIZATION_LOSSES))
        created_before = {id(v) for v in variables_lib.global_variables()}
        variable = variable_scope_lib.get_variable(
            name, shape=shape, dtype=dtype if dtype is not None else self._dtype, initializer=initializer,
            regularizer=regularizer, trainable=trainable and self.trainable, constraint=constraint)
        partitioned = isinstance(variable, partitioned_variables.PartitionedVariable)
        parts = list(variable) if partitioned else [variable]
        if not any(id(part) in created_before for part in parts):
            self._losses.extend(graph.get_collection(graph_lib.GraphKeys.REGULARIZATION_LOSSES)[known:])
        if trainable and self.trainable and not partitioned:
            self._trainable_weights.append(variable)
        else:
            self._non_trainable_weights.extend(parts)
        return variable

    def add_update(self, update: Any) -> None:
        self._updates.append(update)

    def build(self, input_shape: Any) -> None:
        """Makes the layer's variables for inputs of ``input_shape`` (none by default)."""

    def call(self, inputs: graph_lib.Tensor, **kwargs: Any) -> graph_lib.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define call()")

    # -- calling
    def _set_scope(self) -> variable_scope_lib.VariableScope:
        if self._scope is None:
            if self._reuse:
                with variable_scope_lib.variable_scope(self._base_name) as captured:
                    self._scope = captured
            else:
                with variable_scope_lib.variable_scope(None, default_name=self._base_name) as captured:
                    self._scope = captured
        return self._scope

    def __call__(self, inputs: Any, **kwargs: Any) -> graph_lib.Tensor:
        scope = self._set_scope()
        x = op_util.to_tensor(inputs)
        graph = op_util.graph_of(x)
        reuse = True if self.built else self._reuse
        with graph.as_default(), variable_scope_lib.variable_scope(
                scope, reuse=reuse, auxiliary_name_scope=False) as entered:
            with graph.name_scope(entered.original_name_scope):
                if not self.built:
                    if self._dtype is None:
                        self._dtype = x.dtype.base_dtype
                    self.build(x.shape)
                    self.built = True
                outputs = self.call(x, **kwargs)
                if self.activity_regularizer is not None:
                    self._add_activity_loss(outputs)
        update_ops = graph.get_collection_ref(graph_lib.GraphKeys.UPDATE_OPS)
        for update in self._updates:
            if not any(update is known for known in update_ops):
                update_ops.append(update)
        return outputs

    apply = __call__

    def _add_activity_loss(self, outputs: graph_lib.Tensor) -> None:
        assert self.activity_regularizer is not None
        graph = op_util.graph_of(outputs)
        with graph.name_scope("ActivityRegularizer"):
            activity_loss = op_util.to_tensor(self.activity_regularizer(outputs))
            batch_size = math_ops.cast(indexing_ops.strided_slice_from_key(array_ops.shape(outputs), 0),
                                       activity_loss.dtype.base_dtype)
            mean_loss = math_ops.truediv(activity_loss, batch_size)
        self._losses.append(mean_loss)
        graph.add_to_collection(graph_lib.GraphKeys.REGULARIZATION_LOSSES, mean_loss)


# -- the training switch

class KernelBiasLayer(Layer):
    """A layer with a kernel, an optional bias and an activation (``Dense``, ``Conv2D``): their
    settings, kept as TF keeps them (the bias starts at zeros by default), and their weights."""

    def __init__(self, activation: Optional[Callable[[Any], Any]], use_bias: bool, kernel_initializer: Any,
                 bias_initializer: Any, kernel_regularizer: Any, bias_regularizer: Any, activity_regularizer: Any,
                 kernel_constraint: Any, bias_constraint: Any, trainable: bool, name: Optional[str],
                 **kwargs: Any) -> None:
        super().__init__(trainable=trainable, name=name, activity_regularizer=activity_regularizer, **kwargs)
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer if bias_initializer is not None else init_ops.zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.kernel: Any = None
        self.bias: Any = None

    def add_kernel_and_bias(self, kernel_shape: list[Any], units: int) -> None:
        """Makes ``kernel`` of ``kernel_shape`` and, with ``use_bias``, ``bias`` of ``[units]``."""
        self.kernel = self.add_weight("kernel", kernel_shape, initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        if self.use_bias:
            self.bias = self.add_weight("bias", [units], initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer, constraint=self.bias_constraint)


def static_training(training: Any) -> Optional[bool]:
    """The value of ``training`` when it is known now (a Python bool, 0 or 1, a numpy bool, a
    constant tensor), None for a bool tensor fed at run time."""
    if isinstance(training, (bool, np.bool_)):
        return bool(training)
    if isinstance(training, int) and training in (0, 1):
        return bool(training)
    if op_util.is_tensor_like(training):
        t = op_util.to_tensor(training)
        if t.dtype.base_dtype != dtypes.bool_:
            raise TypeError(f"training must be a bool tensor, got {t.name} of dtype {t.dtype.name}")
        value = op_util.static_value(t)
        return None if value is None else bool(np.asarray(value))
    raise TypeError(f"training must be a Tensor, or a Python bool, or 1 or 0; found instead {training!r}")


def switch(training: Any, when_training: Callable[[], Any], otherwise: Callable[[], Any]) -> Any:
    """``when_training()`` or ``otherwise()``: chosen now for a known ``training``, by ``tf.cond`` at
    run time for a bool tensor (TensorFlow's ``smart_cond``)."""
    known = static_training(training)
    if known is None:
        return cond_ops.cond(op_util.to_tensor(training), when_training, otherwise)
    return when_training() if known else otherwise()


# -- the argument checks TensorFlow's layers make

def normalize_tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """An int for every one of ``n`` dimensions, or a tuple of ``n`` ints."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    message = f"The `{name}` argument must be a tuple of {n} integers. Received: {value}"
    try:
        values = tuple(value)
    except TypeError:
        raise ValueError(message) from None
    if len(values) != n or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        raise ValueError(message)
    return tuple(int(v) for v in values)


def normalize_padding(value: Any) -> str:
    """'valid' or 'same', any case, as the ops' "VALID" or "SAME"."""
    padding = value.lower() if isinstance(value, str) else value
    if padding not in ("valid", "same"):
        raise ValueError(f'The `padding` argument must be one of "valid", "same". Received: {value}')
    return str(padding).upper()


def normalize_data_format(value: Any) -> str:
    """'channels_last' or 'channels_first', any case."""
    data_format = value.lower() if isinstance(value, str) else value
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f'The `data_format` argument must be one of "channels_first", "channels_last". '
                         f"Received: {value}")
    return str(data_format)


def require_float(x: graph_lib.Tensor, layer_name: str) -> None:
    if not x.dtype.base_dtype.is_floating:
        raise TypeError(f"{layer_name}: inputs must be a floating point tensor, got {x.name} of dtype "
                        f"{x.dtype.base_dtype.name}")


def channels_to_last(x: graph_lib.Tensor) -> graph_lib.Tensor:
    """NCHW -> NHWC: the conv and pooling ops take channels last only."""
    return array_ops.transpose(x, [0, 2, 3, 1])


def channels_to_first(x: graph_lib.Tensor) -> graph_lib.Tensor:
    """NHWC -> NCHW."""
    return array_ops.transpose(x, [0, 3, 1, 2])
