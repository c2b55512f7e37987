"""``tf.estimator.DNNLinearCombinedClassifier`` and ``Regressor``: wide and deep. The logits are the
sum of a linear model (scope ``linear``, FTRL by default at ``min(0.005, 1/sqrt(#columns))``) and a
DNN (scope ``dnn``, Adagrad by default at 0.001); one train op applies both optimizers, each to the
trainable variables of its own scope, then adds one to the global step, as TF1 does.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

from tensorgrid.estimator import estimator as estimator_lib
from tensorgrid.estimator import model_fn as model_fn_lib
from tensorgrid.estimator import run_config as run_config_lib
from tensorgrid.estimator.canned import dnn
from tensorgrid.estimator.canned import head as head_lib
from tensorgrid.estimator.canned import linear
from tensorgrid.estimator.canned import optimizers
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import state_ops
from tensorgrid.ops import variable_scope
from tensorgrid.train import sync_replicas_optimizer
from tensorgrid.train import training_util

DNN_LEARNING_RATE = 0.001
LINEAR_LEARNING_RATE = 0.005


def _linear_learning_rate(num_linear_feature_columns: int) -> float:
    return min(LINEAR_LEARNING_RATE, 1.0 / math.sqrt(num_linear_feature_columns))


def _check_no_sync_replicas_optimizer(optimizer: Any) -> None:
    if isinstance(optimizer, sync_replicas_optimizer.SyncReplicasOptimizer):
        raise ValueError("SyncReplicasOptimizer does not support multi optimizers case. Therefore, it is not supported "
                         "in DNNLinearCombined model. If you want to use this optimizer, please use either DNN or "
                         "Linear model.")


def _validate_feature_columns(linear_feature_columns: Any, dnn_feature_columns: Any) -> None:
    if not list(linear_feature_columns or []) + list(dnn_feature_columns or []):
        raise ValueError("Either linear_feature_columns or dnn_feature_columns must be defined.")


def _dnn_linear_combined_model_fn(
        features: Any, labels: Any, mode: str, head: head_lib.Head, linear_feature_columns: Any,
        linear_optimizer: Any, dnn_feature_columns: Any, dnn_optimizer: Any, dnn_hidden_units: Any,
        dnn_activation_fn: Optional[Callable[[Any], Any]], dnn_dropout: Optional[float],
        input_layer_partitioner: Any, config: Optional[run_config_lib.RunConfig],
        linear_sparse_combiner: str, batch_norm: bool) -> model_fn_lib.EstimatorSpec:
    linear.check_features(features)
    _validate_feature_columns(linear_feature_columns, dnn_feature_columns)
    num_ps_replicas = config.num_ps_replicas if config else 0
    input_layer_partitioner = input_layer_partitioner or linear.default_partitioner(config)
    graph = graph_lib.get_default_graph()
    parts: list[tuple[Any, str]] = []
    logits = []
    if dnn_feature_columns:
        deep_optimizer = optimizers.get_optimizer_instance(dnn_optimizer, learning_rate=DNN_LEARNING_RATE)
        _check_no_sync_replicas_optimizer(deep_optimizer)
        if not dnn_hidden_units:
            raise ValueError("dnn_hidden_units must be defined when dnn_feature_columns is specified.")
        dnn_partitioner = partitioned_variables.min_max_variable_partitioner(max_partitions=num_ps_replicas)
        with variable_scope.variable_scope("dnn", partitioner=dnn_partitioner) as scope:
            logits.append(dnn.dnn_logits(features, tuple(dnn_feature_columns), head.logits_dimension,
                                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, input_layer_partitioner,
                                         mode, batch_norm))
            parts.append((deep_optimizer, scope.name))
    if linear_feature_columns:
        wide_optimizer = optimizers.get_optimizer_instance(
            linear_optimizer, learning_rate=_linear_learning_rate(len(linear_feature_columns)))
        _check_no_sync_replicas_optimizer(wide_optimizer)
        with variable_scope.variable_scope("linear", partitioner=input_layer_partitioner) as scope:
            linear_logits = linear.linear_logits(features, tuple(linear_feature_columns), head.logits_dimension,
                                                 linear_sparse_combiner)
            dnn.layer_summary(linear_logits, scope.name)
            logits.append(linear_logits)
            parts.append((wide_optimizer, scope.name))

    def _train_op_fn(loss: graph_lib.Tensor) -> Any:
        train_ops = [optimizer.minimize(loss, var_list=graph.get_collection(
            graph_lib.GraphKeys.TRAINABLE_VARIABLES, scope=scope_name)) for optimizer, scope_name in parts]
        train_op = control_flow_ops.group(*train_ops)
        with graph.control_dependencies([train_op]):
            return state_ops.assign_add(training_util.get_global_step(), 1).op

    combined = math_ops.add(logits[0], logits[1]) if len(logits) == 2 else logits[0]
    return head.create_estimator_spec(features=features, mode=mode, labels=labels, logits=combined,
                                      train_op_fn=_train_op_fn)


class DNNLinearCombinedClassifier(estimator_lib.Estimator):
    """The wide-and-deep classifier (``tf.estimator.DNNLinearCombinedClassifier``)."""

    def __init__(self, model_dir: Any = None, linear_feature_columns: Any = None, linear_optimizer: Any = "Ftrl",
                 dnn_feature_columns: Any = None, dnn_optimizer: Any = "Adagrad",
                 dnn_hidden_units: Optional[Sequence[int]] = None,
                 dnn_activation_fn: Optional[Callable[[Any], Any]] = nn_ops.relu, dnn_dropout: Optional[float] = None,
                 n_classes: int = 2, weight_column: Any = None, label_vocabulary: Optional[Sequence[str]] = None,
                 input_layer_partitioner: Any = None, config: Optional[run_config_lib.RunConfig] = None,
                 warm_start_from: Any = None, loss_reduction: str = head_lib.Reduction.SUM, batch_norm: bool = False,
                 linear_sparse_combiner: str = "sum") -> None:
        _validate_feature_columns(linear_feature_columns, dnn_feature_columns)
        head = head_lib.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)

        def _model_fn(features: Any, labels: Any, mode: str, config: run_config_lib.RunConfig) -> Any:
            return _dnn_linear_combined_model_fn(
                features, labels, mode, head, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, input_layer_partitioner, config,
                linear_sparse_combiner, batch_norm)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNLinearCombinedRegressor(estimator_lib.Estimator):
    """The wide-and-deep regressor (``tf.estimator.DNNLinearCombinedRegressor``)."""

    def __init__(self, model_dir: Any = None, linear_feature_columns: Any = None, linear_optimizer: Any = "Ftrl",
                 dnn_feature_columns: Any = None, dnn_optimizer: Any = "Adagrad",
                 dnn_hidden_units: Optional[Sequence[int]] = None,
                 dnn_activation_fn: Optional[Callable[[Any], Any]] = nn_ops.relu, dnn_dropout: Optional[float] = None,
                 label_dimension: int = 1, weight_column: Any = None, input_layer_partitioner: Any = None,
                 config: Optional[run_config_lib.RunConfig] = None, warm_start_from: Any = None,
                 loss_reduction: str = head_lib.Reduction.SUM, batch_norm: bool = False,
                 linear_sparse_combiner: str = "sum") -> None:
        _validate_feature_columns(linear_feature_columns, dnn_feature_columns)
        head = head_lib.RegressionHead(label_dimension, weight_column, loss_reduction)

        def _model_fn(features: Any, labels: Any, mode: str, config: run_config_lib.RunConfig) -> Any:
            return _dnn_linear_combined_model_fn(
                features, labels, mode, head, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, input_layer_partitioner, config,
                linear_sparse_combiner, batch_norm)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)
