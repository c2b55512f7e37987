"""tensorgrid: TensorFlow 1.x's graph API and distributed runtime, in Python.

``import tensorgrid as tf`` and write TF1 programs: build a graph with placeholders,
variables and ops pinned to devices such as ``/job:ps/task:0``, then run it with a
``tf.Session``, in-process or on a cluster of ``tf.train.Server`` tasks.
This module is the public API; everything else is internal.
"""

from __future__ import annotations

from tensorgrid import log_setup as _log_setup

_log_setup.configure_default()

import types as _types

from tensorgrid.data import tf_record_io as _tf_record_io
from tensorgrid import compat, data, distribute, initializers, layers, losses, nn, summary, train, version
from tensorgrid.compat.v2_behavior import disable_eager_execution, disable_v2_behavior, executing_eagerly
from tensorgrid.platform import app, flags
from tensorgrid.platform import gfile as _gfile
from tensorgrid.platform import tf_logging as logging
from tensorgrid import not_provided as _not_provided
from tensorgrid.client.config import ConfigProto, GPUOptions, RunMetadata, RunOptions
from tensorgrid.client.session import InteractiveSession, Session
from tensorgrid.framework import errors
from tensorgrid.framework.device import DeviceSpec
from tensorgrid.framework.indexed_slices import (
    IndexedSlices, IndexedSlicesValue, convert_to_tensor_or_indexed_slices,
)
from tensorgrid.framework.sparse_tensor import SparseTensor, SparseTensorValue
from tensorgrid.framework.dtypes import (
    DType, as_dtype, bool_ as bool, double, float16, float32, float32_ref, float64, float64_ref, half,
    int8, int16, int32, int32_ref, int64, int64_ref, resource, string, uint8, uint16, uint32, uint64,
)
from tensorgrid.framework.graph import (
    Graph, GraphKeys, Operation, Tensor, get_default_graph, get_default_session, reset_default_graph,
)
from tensorgrid.framework.import_graph_def import import_graph_def
from tensorgrid.framework.graph_def import NodeDef  # what device functions test ops against (op.node_def)
from tensorgrid.framework.op_registry import NotDifferentiable, RegisterGradient, no_gradient
from tensorgrid.framework.tensor_conversion import convert_to_tensor, register_tensor_conversion_function
from tensorgrid.framework.tensor_shape import Dimension, TensorShape
from tensorgrid.ops.array_ops import (
    broadcast_to, constant, fill, identity, ones, ones_like, placeholder, placeholder_with_default, rank,
    reshape, shape, size, stop_gradient, zeros, zeros_like,
)
from tensorgrid.ops.array_ops import concat, expand_dims, split, squeeze, stack, tile, transpose, unstack
from tensorgrid.ops.indexing_ops import (
    gather, newaxis, one_hot, slice, strided_slice, unsorted_segment_sum, where,
)
from tensorgrid.ops.data_flow_ops import ConditionalAccumulator, FIFOQueue, SparseConditionalAccumulator
from tensorgrid.ops.control_flow_ops import group, no_op, tuple_ as tuple, with_dependencies
from tensorgrid.ops.cond_ops import cond
from tensorgrid.ops.logging_ops import Assert, Print
from tensorgrid.ops import metrics_impl as _metrics_impl
from tensorgrid.ops.script_ops import numpy_function, py_func
from tensorgrid.ops.while_ops import while_loop
from tensorgrid.ops.map_ops import map_fn
from tensorgrid.ops.tensor_array_ops import TensorArray
from tensorgrid.ops.embedding_ops import dynamic_partition, dynamic_stitch, parallel_dynamic_stitch
from tensorgrid.ops.gradients_impl import gradients
from tensorgrid.ops.init_ops import (
    constant_initializer, glorot_normal_initializer, glorot_uniform_initializer, ones_initializer,
    random_normal_initializer, random_uniform_initializer, truncated_normal_initializer,
    variance_scaling_initializer, zeros_initializer,
)
from tensorgrid.ops.math_ops import (
    abs, add, add_n, arg_max, arg_min, argmax, argmin, cast, div, divide, equal, exp, floordiv, floormod, greater,
    greater_equal, less, less_equal, log, logical_and, logical_not, logical_or, matmul, maximum, minimum,
    mod, multiply, negative, not_equal, pow, range, reciprocal, reduce_max, reduce_mean, reduce_min, reduce_prod,
    reduce_sum, rsqrt, sign, sqrt, square, subtract, to_double, to_float, to_int32, to_int64, truediv,
)
from tensorgrid.ops.math_ops import (
    clip_by_global_norm, clip_by_norm, clip_by_value, floor, global_norm, sigmoid, squared_difference, tanh,
)
from tensorgrid.ops.sparse_ops import (
    sparse_placeholder, sparse_segment_mean, sparse_segment_sqrt_n, sparse_segment_sum, unique,
)
from tensorgrid.ops.parsing_ops import (
    FixedLenFeature, FixedLenSequenceFeature, VarLenFeature, decode_raw, parse_example, parse_single_example,
    parse_single_sequence_example,
)
from tensorgrid.ops.parsing_ops import SparseFeature
from tensorgrid.ops.string_ops import (
    as_string, string_to_hash_bucket, string_to_hash_bucket_fast, string_to_hash_bucket_strong,
)
from tensorgrid.ops.lookup_ops import initialize_all_tables, tables_initializer
# DeepRec's embedding variables: hash-table embeddings that grow with the ids.
from tensorgrid.ops.embedding_variable_ops import (
    CBFFilter, CounterFilter, EmbeddingVariableOption, GlobalStepEvict, InitializerOption, L2WeightEvict, get_embedding_variable,
)
from tensorgrid import lookup, sparse, strings
from tensorgrid import feature_column
from tensorgrid import estimator
from tensorgrid import saved_model
from tensorgrid.ops.partitioned_variables import (
    PartitionedVariable, fixed_size_partitioner, min_max_variable_partitioner, variable_axis_size_partitioner,
)
from tensorgrid.ops.random_ops import random_normal, random_uniform, truncated_normal
from tensorgrid.ops.state_ops import (
    assign, assign_add, assign_sub, is_variable_initialized, scatter_add, scatter_sub, scatter_update,
)
# TF1's queue input pipelines: readers of files, a shuffling queue, the epoch counter (tf.train.batch & co.).
from tensorgrid.ops.data_flow_ops import RandomShuffleQueue
from tensorgrid.ops.io_ops import FixedLengthRecordReader, ReaderBase, TextLineReader, TFRecordReader, WholeFileReader
from tensorgrid.ops.random_ops import random_shuffle
from tensorgrid.ops.state_ops import count_up_to
from tensorgrid.ops.variable_scope import (
    AUTO_REUSE, VariableScope, get_local_variable, get_variable, get_variable_scope, no_regularizer, variable_scope,
)
from tensorgrid.ops.variables import (
    Variable, all_variables, global_variables, global_variables_initializer, initialize_all_variables,
    local_variables, local_variables_initializer, model_variables, report_uninitialized_variables,
    trainable_variables, variables_initializer,
)


def device(device_name_or_function):  # type: ignore[no-untyped-def]
    """Pins the ops created inside to a device (``tf.device``)."""
    return get_default_graph().device(device_name_or_function)


def name_scope(name, default_name=None, values=None):  # type: ignore[no-untyped-def]
    """Opens a name scope in the default graph (or the graph of ``values``)."""
    from tensorgrid.ops import op_util

    graph = op_util.graph_of(*(values or []))
    return graph.name_scope(name if name is not None else default_name)


def container(container_name):  # type: ignore[no-untyped-def]
    """Keeps the state of variables created inside in the named resource container."""
    return get_default_graph().container(container_name)


def control_dependencies(control_inputs):  # type: ignore[no-untyped-def]
    return get_default_graph().control_dependencies(control_inputs)


def colocate_with(op, ignore_existing=False):  # type: ignore[no-untyped-def]
    return get_default_graph().colocate_with(op, ignore_existing)


def add_to_collection(name, value):  # type: ignore[no-untyped-def]
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):  # type: ignore[no-untyped-def]
    get_default_graph().add_to_collections(names, value)


def get_collection(key, scope=None):  # type: ignore[no-untyped-def]
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):  # type: ignore[no-untyped-def]
    return get_default_graph().get_collection_ref(key)


def set_random_seed(seed):  # type: ignore[no-untyped-def]
    """Sets the graph-level seed: random ops without their own seed become deterministic."""
    get_default_graph().seed = seed


io = _types.SimpleNamespace(
    TFRecordWriter=_tf_record_io.TFRecordWriter, TFRecordOptions=_tf_record_io.TFRecordOptions,
    TFRecordCompressionType=_tf_record_io.TFRecordCompressionType,
    tf_record_iterator=_tf_record_io.tf_record_iterator,
    FixedLenFeature=FixedLenFeature, FixedLenSequenceFeature=FixedLenSequenceFeature, VarLenFeature=VarLenFeature,
    SparseFeature=SparseFeature, parse_example=parse_example, parse_single_example=parse_single_example,
    parse_single_sequence_example=parse_single_sequence_example, decode_raw=decode_raw, gfile=_gfile.io_gfile)
"""``tf.io``: TFRecord files, parsing tf.train.Example records, raw bytes, files (``tf.io.gfile``)."""
gfile = _gfile.tf1_gfile
"""``tf.gfile``: TF1's names for the file functions of ``tf.io.gfile``."""

python_io = io
"""``tf.python_io`` (TF1's older name for the same)."""

random = _types.SimpleNamespace(
    normal=random_normal, uniform=random_uniform, truncated_normal=truncated_normal, shuffle=random_shuffle,
    set_random_seed=set_random_seed, log_uniform_candidate_sampler=nn.log_uniform_candidate_sampler,
    uniform_candidate_sampler=nn.uniform_candidate_sampler)
"""``tf.random``: TF1's names for the random ops and the candidate samplers."""

metrics = _types.SimpleNamespace(**{name: getattr(_metrics_impl, name) for name in (
    "accuracy", "auc", "false_negatives", "false_negatives_at_thresholds", "false_positives",
    "false_positives_at_thresholds", "mean", "mean_absolute_error", "mean_squared_error", "precision",
    "precision_at_thresholds", "recall", "recall_at_thresholds", "root_mean_squared_error", "true_negatives",
    "true_negatives_at_thresholds", "true_positives", "true_positives_at_thresholds")})
"""``tf.metrics``: TF1's streaming metrics (``ops/metrics_impl.py``); not ``tensorgrid.monitoring``,
the task's Prometheus counters."""

__version__ = version.VERSION
"""The TensorFlow API version tensorgrid implements (TF 1.15's), not tensorgrid's own
release (``tf.version.TENSORGRID_VERSION``): see ``version.py``."""
VERSION = version.VERSION
"""TF1's ``tf.VERSION``, the same as ``__version__``."""
__git_version__ = GIT_VERSION = version.GIT_VERSION
__compiler_version__ = COMPILER_VERSION = version.COMPILER_VERSION

sub = subtract
mul = multiply
neg = negative


# PEP 562's module __getattr__, for the names TF1 programs reach that tensorgrid leaves out on purpose
# (``tf.contrib``, ...): an AttributeError naming it and pointing to docs/api.md (``not_provided.py``).
# Set through globals() so that type checkers do not see it and still report a misspelt tensorgrid name.
globals()["__getattr__"] = _not_provided.module_getattr(__name__)
