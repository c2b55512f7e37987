"""``tf.estimator.DNNClassifier`` and ``DNNRegressor``: the deep model, ``input_layer`` over the
feature columns then fully connected hidden layers, under the variable scope ``dnn`` with TF's
names (``dnn/input_from_feature_columns/input_layer/<column>/...``, ``dnn/hiddenlayer_<i>/kernel``
and ``bias``, ``dnn/logits/kernel`` and ``bias``), partitioned over the PS tasks, trained with
Adagrad by default, with a classification or regression head (``canned/head.py``).

The hidden and logits layers are ``tf.layers.Dense`` layers made in the ``dnn`` scope, whose
partitioner (one part per PS task at most) makes their kernels ``PartitionedVariable``s as in TF.
With ``batch_norm`` each hidden layer's output (after its dropout) goes through a
``tf.layers.BatchNormalization`` (momentum 0.999, variables ``dnn/hiddenlayer_<i>/batchnorm_<i>/...``),
normalizing with the batch's statistics when training and the moving ones otherwise; the head
runs its moving-average updates (UPDATE_OPS) with the train op.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tensorgrid.estimator import estimator as estimator_lib
from tensorgrid.estimator import model_fn as model_fn_lib
from tensorgrid.estimator import run_config as run_config_lib
from tensorgrid.estimator.canned import head as head_lib
from tensorgrid.estimator.canned import linear
from tensorgrid.estimator.canned import optimizers
from tensorgrid.feature_column import models as feature_column_models
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.layers import core as core_layers
from tensorgrid.layers import normalization as normalization_layers
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import summary_ops
from tensorgrid.ops import variable_scope

LEARNING_RATE = 0.05
"""The learning rate of an optimizer given by name (TF's ``dnn._LEARNING_RATE``)."""

ModeKeys = model_fn_lib.ModeKeys


def layer_summary(value: graph_lib.Tensor, tag: str) -> None:
    zero_fraction = math_ops.reduce_mean(math_ops.cast(math_ops.equal(value, 0.0), dtypes.float32))
    summary_ops.scalar(f"{tag}/fraction_of_zero_values", zero_fraction)
    summary_ops.histogram(f"{tag}/activation", value)


def _check_hidden_units(hidden_units: Any) -> list[int]:
    units = list(hidden_units or [])
    for count in units:
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError(f"hidden_units must be positive integers, got {hidden_units!r}")
    return units


def dnn_logits(features: Any, feature_columns: Sequence[Any], units: int, hidden_units: Sequence[int],
               activation_fn: Optional[Callable[[Any], Any]], dropout: Optional[float], input_layer_partitioner: Any,
               mode: str, batch_norm: bool = False) -> graph_lib.Tensor:
    """The ``[batch, units]`` logits of the deep model, built in the current (``dnn``) scope:
    dropout (when training, ``dropout`` being the probability of dropping) after each hidden layer,
    then batch normalization with ``batch_norm``."""
    if isinstance(units, bool) or not isinstance(units, int):
        raise ValueError(f"units must be an int.  Given type: {type(units)}")
    training = mode == ModeKeys.TRAIN
    with variable_scope.variable_scope("input_from_feature_columns", partitioner=input_layer_partitioner):
        net = feature_column_models.input_layer(features, feature_columns)
    for layer_id, layer_units in enumerate(_check_hidden_units(hidden_units)):
        with variable_scope.variable_scope(f"hiddenlayer_{layer_id}") as scope:
            hidden_layer = core_layers.Dense(layer_units, activation=activation_fn,
                                             kernel_initializer=init_ops.glorot_uniform_initializer(),
                                             name=scope.name, _scope=scope)
            normalization = normalization_layers.BatchNormalization(
                momentum=0.999, trainable=True, name=f"batchnorm_{layer_id}",
                _scope=f"batchnorm_{layer_id}") if batch_norm else None
        net = hidden_layer(net)
        if dropout is not None and training:
            net = core_layers.dropout(net, rate=dropout, training=True)
        if normalization is not None:
            net = normalization(net, training=training)
        layer_summary(net, scope.name)
    with variable_scope.variable_scope("logits") as scope:
        logits_layer = core_layers.Dense(units, kernel_initializer=init_ops.glorot_uniform_initializer(),
                                         name=scope.name, _scope=scope)
    logits = logits_layer(net)
    layer_summary(logits, scope.name)
    return logits


def _dnn_model_fn(features: Any, labels: Any, mode: str, head: head_lib.Head, hidden_units: Sequence[int],
                  feature_columns: Sequence[Any], optimizer: Any, activation_fn: Optional[Callable[[Any], Any]],
                  dropout: Optional[float], input_layer_partitioner: Any,
                  config: Optional[run_config_lib.RunConfig], batch_norm: bool) -> model_fn_lib.EstimatorSpec:
    chosen = optimizers.get_optimizer_instance(optimizer, learning_rate=LEARNING_RATE)
    linear.check_features(features)
    num_ps_replicas = config.num_ps_replicas if config else 0
    with variable_scope.variable_scope(
            "dnn", partitioner=partitioned_variables.min_max_variable_partitioner(max_partitions=num_ps_replicas)
    ) as scope:
        logits = dnn_logits(features, feature_columns, head.logits_dimension, hidden_units, activation_fn, dropout,
                            input_layer_partitioner or linear.default_partitioner(config), mode, bool(batch_norm))
    return linear.build_head_in(scope, head, features, mode, labels, logits, optimizer=chosen)


class DNNClassifier(estimator_lib.Estimator):
    """A feed-forward classifier over feature columns (``tf.estimator.DNNClassifier``), Adagrad by default."""

    def __init__(self, hidden_units: Sequence[int], feature_columns: Any, model_dir: Any = None, n_classes: int = 2,
                 weight_column: Any = None, label_vocabulary: Optional[Sequence[str]] = None,
                 optimizer: Any = "Adagrad", activation_fn: Optional[Callable[[Any], Any]] = nn_ops.relu,
                 dropout: Optional[float] = None, input_layer_partitioner: Any = None,
                 config: Optional[run_config_lib.RunConfig] = None, warm_start_from: Any = None,
                 loss_reduction: str = head_lib.Reduction.SUM, batch_norm: bool = False) -> None:
        head = head_lib.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        columns = tuple(feature_columns or [])

        def _model_fn(features: Any, labels: Any, mode: str, config: run_config_lib.RunConfig) -> Any:
            return _dnn_model_fn(features, labels, mode, head, hidden_units, columns, optimizer, activation_fn,
                                 dropout, input_layer_partitioner, config, batch_norm)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNRegressor(estimator_lib.Estimator):
    """A feed-forward regressor over feature columns (``tf.estimator.DNNRegressor``), Adagrad by default."""

    def __init__(self, hidden_units: Sequence[int], feature_columns: Any, model_dir: Any = None,
                 label_dimension: int = 1, weight_column: Any = None, optimizer: Any = "Adagrad",
                 activation_fn: Optional[Callable[[Any], Any]] = nn_ops.relu, dropout: Optional[float] = None,
                 input_layer_partitioner: Any = None, config: Optional[run_config_lib.RunConfig] = None,
                 warm_start_from: Any = None, loss_reduction: str = head_lib.Reduction.SUM,
                 batch_norm: bool = False) -> None:
        head = head_lib.RegressionHead(label_dimension, weight_column, loss_reduction)
        columns = tuple(feature_columns or [])

        def _model_fn(features: Any, labels: Any, mode: str, config: run_config_lib.RunConfig) -> Any:
            return _dnn_model_fn(features, labels, mode, head, hidden_units, columns, optimizer, activation_fn,
                                 dropout, input_layer_partitioner, config, batch_norm)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)

