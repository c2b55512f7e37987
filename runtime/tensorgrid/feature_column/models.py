"""The models built from feature columns: ``input_layer`` (the deep part's input), ``linear_model``
(the wide part) and ``make_parse_example_spec`` (what ``tf.parse_example`` must read for them).

Columns are read in the order of their names and their variables are created as TF1 names them:
``input_layer/<column>/embedding_weights``, ``linear_model/<column>/weights`` and
``linear_model/bias_weights``, so checkpoints and variable lists line up with TensorFlow's.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from tensorgrid.feature_column import column_base
from tensorgrid.feature_column import sparse_inputs
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import variable_scope

SPARSE_COMBINERS = ("mean", "sqrtn", "sum")


def _normalize_columns(feature_columns: Any) -> list[column_base.FeatureColumn]:
    """The columns as a list, refusing what TF1 refuses: a dict, none, non-columns, two of one name."""
    if isinstance(feature_columns, column_base.FeatureColumn):
        feature_columns = [feature_columns]
    if isinstance(feature_columns, dict):
        raise ValueError("Expected feature_columns to be iterable, found dict.")
    columns = list(feature_columns) if isinstance(feature_columns, Iterable) else None
    if columns is None:
        raise ValueError(f"Expected feature_columns to be iterable, found {type(feature_columns).__name__}.")
    if not columns:
        raise ValueError("Expected feature_columns to not be empty.")
    by_name: dict[str, column_base.FeatureColumn] = {}
    for column in columns:
        if not isinstance(column, column_base.FeatureColumn):
            raise ValueError(f"Items of feature_columns must be a _FeatureColumn. Given: {column}.")
        if column.name in by_name:
            raise ValueError(f"Duplicate feature column name found for columns: {by_name[column.name]} and {column}. "
                             "This usually means that these columns refer to same base feature. Either one must be "
                             "discarded or a duplicated but renamed item must be inserted in features dict.")
        by_name[column.name] = column
    return columns


def _flatten_to_batch(tensor: graph_lib.Tensor, num_elements: int) -> graph_lib.Tensor:
    """``[batch, num_elements]``: each example's values in one row."""
    batch_size = indexing_ops.strided_slice_from_key(array_ops.shape(tensor), 0)
    flat = array_ops.reshape(tensor, [batch_size, num_elements])
    flat.set_shape(tensor.shape[:1].concatenate([num_elements]))
    return flat


def _variables_created(graph: graph_lib.Graph, before: int) -> list[Any]:
    return list(graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES)[before:])


def input_layer(features: Any, feature_columns: Any, weight_collections: Optional[list[str]] = None,
                trainable: bool = True, cols_to_vars: Optional[dict[Any, list[Any]]] = None,
                cols_to_output_tensors: Optional[dict[Any, graph_lib.Tensor]] = None) -> graph_lib.Tensor:
    """``[batch, sum of the columns' sizes]`` float32: each dense column's tensor flattened per
    example, concatenated in the order of the columns' names (``tf.feature_column.input_layer``)."""
    columns = _normalize_columns(feature_columns)
    for column in columns:
        if not isinstance(column, column_base.DenseColumn):
            raise ValueError(f"Items of feature_columns must be a _DenseColumn. You can wrap a categorical column "
                             f"with an embedding_column or indicator_column. Given: {column}")
    collections = column_base.with_default_collections(weight_collections)
    graph = graph_lib.get_default_graph()
    builder = column_base.FeatureBuilder(features)
    outputs = []
    with variable_scope.variable_scope(None, default_name="input_layer"):
        for column in sorted(columns, key=lambda c: c.name):
            assert isinstance(column, column_base.DenseColumn)
            before = len(graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES))
            with variable_scope.variable_scope(None, default_name=column.var_scope_name):
                tensor = column.dense_tensor(builder, collections, trainable)
                num_elements = column.variable_shape.num_elements()
                if num_elements is None:
                    raise ValueError(f"feature column {column.name}: its shape {column.variable_shape} must be known")
                flat = _flatten_to_batch(tensor, num_elements)
            outputs.append(flat)
            if cols_to_vars is not None:
                cols_to_vars[column] = _variables_created(graph, before)
            if cols_to_output_tensors is not None:
                cols_to_output_tensors[column] = flat
        return array_ops.concat(outputs, 1)


def _linear_weights(column: column_base.FeatureColumn, units: int, collections: list[str], trainable: bool) -> Any:
    if isinstance(column, column_base.CategoricalColumn):
        return column.make_weights("weights", units, init_ops.zeros_initializer(), trainable, collections)
    assert isinstance(column, column_base.DenseColumn)
    rows = column.variable_shape.num_elements()
    return variable_scope.get_variable("weights", shape=[rows, units], dtype=dtypes.float32,
                                       initializer=init_ops.zeros_initializer(), trainable=trainable,
                                       collections=collections)


def _as_dense(weights: Any) -> Any:
    if isinstance(weights, partitioned_variables.PartitionedVariable):
        return weights.as_tensor()
    return weights


def _weighted_sum(column: column_base.FeatureColumn, builder: column_base.FeatureBuilder, units: int,
                  sparse_combiner: str, collections: list[str], trainable: bool) -> graph_lib.Tensor:
    """One column's ``[batch, units]`` contribution: a categorical column sums
    (or ``sparse_combiner``s) the weight rows of its ids; a dense one multiplies its values by them."""
    if isinstance(column, column_base.CategoricalColumn):
        ids, id_weights = column.sparse_tensors(builder, collections, trainable)
        weights = _linear_weights(column, units, collections, trainable)
        return sparse_inputs.safe_embedding_lookup_sparse(weights, ids, id_weights, sparse_combiner, column.name)
    assert isinstance(column, column_base.DenseColumn)
    num_elements = column.variable_shape.num_elements()
    if num_elements is None:
        raise ValueError(f"feature column {column.name}: its shape {column.variable_shape} must be known")
    # TF creates a column's weights before reading it (an embedding column's table comes second).
    weights = _linear_weights(column, units, collections, trainable)
    tensor = column.dense_tensor(builder, collections, trainable)
    return math_ops.matmul(_flatten_to_batch(tensor, num_elements), _as_dense(weights), name="weighted_sum")


def linear_model(features: Any, feature_columns: Any, units: int = 1, sparse_combiner: str = "sum",
                 weight_collections: Optional[list[str]] = None, trainable: bool = True,
                 cols_to_vars: Optional[dict[Any, Any]] = None) -> graph_lib.Tensor:
    """``[batch, units]``: the sum of each column's weighted contribution plus a bias
    (``tf.feature_column.linear_model``); every weight starts at zero."""
    if sparse_combiner not in SPARSE_COMBINERS:
        raise ValueError(f"sparse_combiner must be one of {list(SPARSE_COMBINERS)}, got {sparse_combiner!r}")
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(f"units must be a positive integer, got {units!r}")
    columns = _normalize_columns(feature_columns)
    for column in columns:
        if not isinstance(column, (column_base.DenseColumn, column_base.CategoricalColumn)):
            raise ValueError(f"Items of feature_columns must be either a _DenseColumn or _CategoricalColumn. "
                             f"Given: {column}")
    collections = column_base.with_default_collections(weight_collections)
    graph = graph_lib.get_default_graph()
    builder = column_base.FeatureBuilder(features)
    sums = []
    with variable_scope.variable_scope(None, default_name="linear_model"):
        for column in sorted(columns, key=lambda c: c.name):
            before = len(graph.get_collection(graph_lib.GraphKeys.GLOBAL_VARIABLES))
            with variable_scope.variable_scope(None, default_name=column.var_scope_name):
                weighted = _weighted_sum(column, builder, units, sparse_combiner, collections, trainable)
            sums.append(weighted)
            if cols_to_vars is not None:
                cols_to_vars[column] = _variables_created(graph, before)
        without_bias = math_ops.add_n(sums, name="weighted_sum_no_bias") if len(sums) > 1 else sums[0]
        bias = variable_scope.get_variable("bias_weights", shape=[units], dtype=dtypes.float32,
                                           initializer=init_ops.zeros_initializer(), trainable=trainable,
                                           collections=collections)
        if cols_to_vars is not None:
            cols_to_vars["bias"] = list(bias) if isinstance(
                bias, partitioned_variables.PartitionedVariable) else [bias]
        return nn_ops.bias_add(without_bias, _as_dense(bias), name="weighted_sum")


def make_parse_example_spec(feature_columns: Any) -> dict[str, Any]:
    """The ``tf.parse_example`` features the columns read, merged; one key read two ways is an error."""
    spec: dict[str, Any] = {}
    for column in feature_columns:
        if not isinstance(column, column_base.FeatureColumn):
            raise ValueError(f"All feature_columns must be _FeatureColumn instances. Given: {column}")
        for key, feature in column.parse_example_spec.items():
            if key in spec and spec[key] != feature:
                raise ValueError(f"feature_columns contain different parse_spec for key {key}. Given {feature} "
                                 f"and {spec[key]}")
            spec[key] = feature
    return spec
