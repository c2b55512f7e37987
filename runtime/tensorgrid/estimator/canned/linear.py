"""``tf.estimator.LinearClassifier`` and ``LinearRegressor``: the wide model, ``linear_model`` over
the feature columns under the variable scope ``linear`` (variables ``linear/linear_model/<column>/weights``
and ``linear/linear_model/bias_weights``), partitioned over the PS tasks, trained with FTRL by
default, with a classification or regression head (``canned/head.py``)."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

from tensorgrid.estimator import estimator as estimator_lib
from tensorgrid.estimator import model_fn as model_fn_lib
from tensorgrid.estimator import run_config as run_config_lib
from tensorgrid.estimator.canned import head as head_lib
from tensorgrid.estimator.canned import optimizers
from tensorgrid.feature_column import models as feature_column_models
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import summary_ops
from tensorgrid.ops import variable_scope
from tensorgrid.train import ftrl

LEARNING_RATE = 0.2
"""The learning rate of an optimizer given by name (TF's ``linear._LEARNING_RATE``)."""
INPUT_LAYER_MIN_SLICE_SIZE = 64 << 20
"""The smallest part of a partitioned feature-column variable, in bytes (TF's default partitioner)."""


def default_partitioner(config: Optional[run_config_lib.RunConfig], min_slice_size: int = INPUT_LAYER_MIN_SLICE_SIZE
                        ) -> Callable[..., list[int]]:
    """A variable split over at most one part per PS task, each part at least ``min_slice_size`` bytes."""
    num_ps_replicas = config.num_ps_replicas if config else 0
    return partitioned_variables.min_max_variable_partitioner(max_partitions=num_ps_replicas,
                                                              min_slice_size=min_slice_size)


def check_features(features: Any) -> None:
    if not isinstance(features, dict):
        raise ValueError(f"features should be a dictionary of `Tensor`s. Given type: {type(features)}")


def _parts(variable: Any) -> list[Any]:
    return list(variable) if isinstance(variable, partitioned_variables.PartitionedVariable) else [variable]


def _zero_fraction(values: Sequence[Any]) -> graph_lib.Tensor:
    """The fraction of the elements of ``values`` that are 0."""
    zeros = [math_ops.reduce_sum(math_ops.cast(math_ops.equal(value, 0.0), dtypes.float32)) for value in values]
    sizes = [math_ops.cast(array_ops.size(value), dtypes.float32) for value in values]
    return math_ops.truediv(math_ops.add_n(zeros), math_ops.add_n(sizes))


def linear_logits(features: Any, feature_columns: Sequence[Any], units: int, sparse_combiner: str) -> graph_lib.Tensor:
    """``linear_model``'s ``[batch, units]`` logits, with the summaries TF's linear estimators write
    (``bias`` and ``fraction_of_zero_weights``)."""
    columns_to_variables: dict[Any, Any] = {}
    logits = feature_column_models.linear_model(features, feature_columns, units=units,
                                                sparse_combiner=sparse_combiner, cols_to_vars=columns_to_variables)
    bias = [part for variable in columns_to_variables.pop("bias") for part in _parts(variable)]
    # An embedding variable's rows are not one tensor: the summary counts the fixed weights only.
    weights = [part for variables in columns_to_variables.values() for variable in variables
               for part in _parts(variable) if not isinstance(part, embedding_variable_ops.EmbeddingVariable)]
    if units > 1:
        summary_ops.histogram("bias", bias[0].value())
    else:
        summary_ops.scalar("bias", array_ops.reshape(bias[0].value(), []))
    if weights:
        summary_ops.scalar("fraction_of_zero_weights", _zero_fraction([weight.value() for weight in weights]))
    return logits


def _linear_model_fn(features: Any, labels: Any, mode: str, head: head_lib.Head, feature_columns: Sequence[Any],
                     optimizer: Any, partitioner: Any, config: Optional[run_config_lib.RunConfig],
                     sparse_combiner: str) -> model_fn_lib.EstimatorSpec:
    check_features(features)
    with variable_scope.variable_scope("linear", partitioner=partitioner or default_partitioner(config)) as scope:
        logits = linear_logits(features, feature_columns, head.logits_dimension, sparse_combiner)
    if not optimizer:
        chosen: Any = ftrl.FtrlOptimizer(learning_rate=min(LEARNING_RATE, 1.0 / math.sqrt(len(feature_columns))))
    else:
        chosen = optimizer
    return build_head_in(scope, head, features, mode, labels, logits,
                         optimizer=optimizers.get_optimizer_instance(chosen, LEARNING_RATE))


def build_head_in(scope: variable_scope.VariableScope, head: head_lib.Head, features: Any, mode: str, labels: Any,
                  logits: graph_lib.Tensor, optimizer: Any) -> model_fn_lib.EstimatorSpec:
    """The head's spec built in the name scope of the model's ``scope``, as TF builds it (the
    optimizer's own variables are ``linear/head/beta1_power``), but not in the variable scope: the
    slots keep the names of their variables (``<variable>/Ftrl``) where TF's, made in the variable
    scope, are saved as ``<variable>/part_0/Ftrl`` (docs/differences.md)."""
    with graph_lib.get_default_graph().name_scope(scope.original_name_scope):
        return head.create_estimator_spec(features=features, mode=mode, labels=labels, logits=logits,
                                          optimizer=optimizer)


class LinearClassifier(estimator_lib.Estimator):
    """A linear classifier over feature columns (``tf.estimator.LinearClassifier``): logistic loss
    for ``n_classes=2``, softmax cross entropy above, FTRL by default."""

    def __init__(self, feature_columns: Any, model_dir: Any = None, n_classes: int = 2, weight_column: Any = None,
                 label_vocabulary: Optional[Sequence[str]] = None, optimizer: Any = "Ftrl",
                 config: Optional[run_config_lib.RunConfig] = None, partitioner: Any = None,
                 warm_start_from: Any = None, loss_reduction: str = head_lib.Reduction.SUM,
                 sparse_combiner: str = "sum") -> None:
        head = head_lib.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        columns = tuple(feature_columns or [])

        def _model_fn(features: Any, labels: Any, mode: str, config: run_config_lib.RunConfig) -> Any:
            return _linear_model_fn(features, labels, mode, head, columns, optimizer, partitioner, config,
                                    sparse_combiner)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class LinearRegressor(estimator_lib.Estimator):
    """A linear regressor over feature columns (``tf.estimator.LinearRegressor``): squared error, FTRL by default."""

    def __init__(self, feature_columns: Any, model_dir: Any = None, label_dimension: int = 1,
                 weight_column: Any = None, optimizer: Any = "Ftrl", config: Optional[run_config_lib.RunConfig] = None,
                 partitioner: Any = None, warm_start_from: Any = None, loss_reduction: str = head_lib.Reduction.SUM,
                 sparse_combiner: str = "sum") -> None:
        head = head_lib.RegressionHead(label_dimension, weight_column, loss_reduction)
        columns = tuple(feature_columns or [])

        def _model_fn(features: Any, labels: Any, mode: str, config: run_config_lib.RunConfig) -> Any:
            return _linear_model_fn(features, labels, mode, head, columns, optimizer, partitioner, config,
                                    sparse_combiner)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)
