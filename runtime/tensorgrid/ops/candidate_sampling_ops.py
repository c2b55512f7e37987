"""Candidate sampling (``tf.nn.log_uniform_candidate_sampler``, ``uniform_candidate_sampler``,
``compute_accidental_hits``) and the sampled losses built on it (``tf.nn.nce_loss``,
``tf.nn.sampled_softmax_loss``), composed as TensorFlow's ``nn_impl._compute_sampled_logits``:
the true and sampled classes' rows of a (possibly sharded) weight table, their logits against the
inputs, corrected by the log of each class's expected count.

The samplers' kernels are ``kernels/candidate_sampling_kernels.py``.
"""

from __future__ import annotations

import collections
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import array_ops
from tensorgrid.ops import embedding_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import losses_impl
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import random_ops

for _op_type in ("LogUniformCandidateSampler", "UniformCandidateSampler"):
    op_registry.register_op(_op_type, stateful=True)
    op_registry.NotDifferentiable(_op_type)
op_registry.register_op("ComputeAccidentalHits")
op_registry.NotDifferentiable("ComputeAccidentalHits")

CandidateSamples = collections.namedtuple("CandidateSamples",
                                          ["sampled_candidates", "true_expected_count", "sampled_expected_count"])
"""What a sampler returns, with TensorFlow's field names."""
AccidentalHits = collections.namedtuple("AccidentalHits", ["indices", "ids", "weights"])


def _true_classes(true_classes: Any) -> graph_lib.Tensor:
    classes = op_util.to_tensor(true_classes, dtype=dtypes.int64, name="true_classes")
    if classes.dtype.base_dtype != dtypes.int64:
        raise TypeError(f"true_classes must be int64, got {classes.dtype.base_dtype.name}")
    return classes


def _candidate_sampler(op_type: str, true_classes: Any, num_true: int, num_sampled: int, unique: bool,
                       range_max: int, seed: Optional[int], name: Optional[str]) -> CandidateSamples:
    for arg, value in (("num_true", num_true), ("num_sampled", num_sampled), ("range_max", range_max)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{op_type}: {arg} must be a positive integer, got {value!r}")
    classes = _true_classes(true_classes)
    seed1, seed2 = random_ops.get_seed(seed)
    attrs = {"num_true": int(num_true), "num_sampled": int(num_sampled), "unique": bool(unique),
             "range_max": int(range_max), "seed": seed1 or 0, "seed2": seed2 or 0}
    op = op_util.make_op(op_type, [classes], [(dtypes.int64, (int(num_sampled),)),
                                              (dtypes.float32, classes.shape),
                                              (dtypes.float32, (int(num_sampled),))], name or op_type, attrs)
    return CandidateSamples(*op.outputs)


def log_uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int, unique: bool, range_max: int,
                                  seed: Optional[int] = None, name: Optional[str] = None) -> CandidateSamples:
    """``num_sampled`` ids of ``[0, range_max)`` drawn with P(k) = log((k+2)/(k+1)) / log(range_max+1)
    (Zipf-like: small ids, the frequent words of a vocabulary sorted by count, come most often);
    distinct ids when ``unique``. Also the expected count of each true class and each sampled id."""
    return _candidate_sampler("LogUniformCandidateSampler", true_classes, num_true, num_sampled, unique, range_max,
                              seed, name)


def uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int, unique: bool, range_max: int,
                              seed: Optional[int] = None, name: Optional[str] = None) -> CandidateSamples:
    """As ``log_uniform_candidate_sampler``, with every id of ``[0, range_max)`` equally likely."""
    return _candidate_sampler("UniformCandidateSampler", true_classes, num_true, num_sampled, unique, range_max,
                              seed, name)


def compute_accidental_hits(true_classes: Any, sampled_candidates: Any, num_true: int, seed: Optional[int] = None,
                            name: Optional[str] = None) -> AccidentalHits:
    """(row, position in ``sampled_candidates``, -FLT_MAX) for each true class of a row that was sampled;
    ``seed`` is accepted, as TF accepts it, and not used."""
    classes = _true_classes(true_classes)
    sampled = op_util.to_tensor(sampled_candidates, dtype=dtypes.int64, name="sampled_candidates")
    op = op_util.make_op("ComputeAccidentalHits", [classes, sampled],
                         [(dtypes.int32, (None,)), (dtypes.int64, (None,)), (dtypes.float32, (None,))],
                         name or "ComputeAccidentalHits", {"num_true": int(num_true)})
    return AccidentalHits(*op.outputs)


def _part(x: graph_lib.Tensor, key: Any) -> graph_lib.Tensor:
    """``x[key]`` (a strided slice)."""
    return indexing_ops.strided_slice_from_key(x, key)


def _sum_rows(x: graph_lib.Tensor) -> graph_lib.Tensor:
    """Each row's sum, as a matmul with a column of ones (as TensorFlow computes it, for its speed)."""
    columns = _part(array_ops.shape(x), 1)
    ones = array_ops.ones(array_ops.stack([columns, 1]), x.dtype.base_dtype)
    return array_ops.reshape(math_ops.matmul(x, ones), [-1])


def _compute_sampled_logits(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int, num_classes: int,
                            num_true: int, sampled_values: Any, remove_accidental_hits: bool,
                            partition_strategy: str, name: str, seed: Optional[int]) -> tuple[Any, Any]:
    """(logits, labels) of the true and sampled classes, ``[batch, num_true + num_sampled]`` each."""
    if isinstance(weights, partitioned_variables.PartitionedVariable):
        weights = list(weights)
    if not isinstance(weights, (list, tuple)):
        weights = [weights]
    graph = op_util.graph_of(*weights, biases, inputs, labels)
    with graph.as_default(), graph.name_scope(name):
        labels = op_util.to_tensor(labels)
        if labels.dtype.base_dtype != dtypes.int64:
            labels = math_ops.cast(labels, dtypes.int64)
        inputs = op_util.to_tensor(inputs)
        labels_flat = array_ops.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(labels, num_true, num_sampled, True, num_classes, seed=seed)
        sampled, true_expected_count, sampled_expected_count = (array_ops.stop_gradient(s) for s in sampled_values)
        sampled = math_ops.cast(sampled, dtypes.int64)
        all_ids = array_ops.concat([labels_flat, sampled], 0)
        all_w = embedding_ops.embedding_lookup(list(weights), all_ids, partition_strategy=partition_strategy)
        if all_w.dtype.base_dtype != inputs.dtype.base_dtype:
            all_w = math_ops.cast(all_w, inputs.dtype.base_dtype)
        true_count = _part(array_ops.shape(labels_flat), 0)
        true_w, sampled_w = _part(all_w, slice(None, true_count)), _part(all_w, slice(true_count, None))
        sampled_logits = math_ops.matmul(inputs, sampled_w, transpose_b=True)
        all_b = embedding_ops.embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype.base_dtype != inputs.dtype.base_dtype:
            all_b = math_ops.cast(all_b, inputs.dtype.base_dtype)
        true_b, sampled_b = _part(all_b, slice(None, true_count)), _part(all_b, slice(true_count, None))
        dim = _part(array_ops.shape(true_w), slice(1, 2))
        row_wise_dots = math_ops.multiply(array_ops.expand_dims(inputs, 1),
                                          array_ops.reshape(true_w, array_ops.concat([[-1, num_true], dim], 0)))
        dots_as_matrix = array_ops.reshape(row_wise_dots, array_ops.concat([[-1], dim], 0))
        true_logits = array_ops.reshape(_sum_rows(dots_as_matrix), [-1, num_true])
        true_logits = math_ops.add(true_logits, array_ops.reshape(true_b, [-1, num_true]))
        sampled_logits = math_ops.add(sampled_logits, sampled_b)
        if remove_accidental_hits:
            sampled_logits = math_ops.add(sampled_logits, _accidental_hit_mask(labels, sampled, num_true,
                                                                               num_sampled, sampled_logits))
        true_logits = math_ops.subtract(true_logits, math_ops.log(true_expected_count))
        sampled_logits = math_ops.subtract(sampled_logits, math_ops.log(sampled_expected_count))
        out_logits = array_ops.concat([true_logits, sampled_logits], 1)
        out_labels = array_ops.concat([math_ops.divide(array_ops.ones_like(true_logits), float(num_true)),
                                       array_ops.zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def _accidental_hit_mask(labels: graph_lib.Tensor, sampled: graph_lib.Tensor, num_true: int, num_sampled: int,
                         sampled_logits: graph_lib.Tensor) -> graph_lib.Tensor:
    """``[batch, num_sampled]``: -FLT_MAX where a sampled id is one of the row's true classes, else 0
    (TF's ``sparse_to_dense`` of ``compute_accidental_hits``; a hit found twice is still -FLT_MAX)."""
    dtype = sampled_logits.dtype.base_dtype
    rows, positions, _ = compute_accidental_hits(labels, sampled, num_true=num_true)
    batch = _part(array_ops.shape(labels), 0)
    flat = math_ops.add(math_ops.multiply(math_ops.cast(rows, dtypes.int64), num_sampled), positions)
    hits = indexing_ops.unsorted_segment_sum(array_ops.ones_like(flat, dtype=dtype), flat,
                                             math_ops.multiply(math_ops.cast(batch, dtypes.int64), num_sampled))
    is_hit = math_ops.cast(math_ops.greater(hits, 0), dtype)
    mask = math_ops.multiply(is_hit, float(np.finfo(np.float32).min))
    return array_ops.reshape(mask, array_ops.stack([batch, num_sampled]))


def nce_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int, num_classes: int,
             num_true: int = 1, sampled_values: Any = None, remove_accidental_hits: bool = False,
             partition_strategy: str = "mod", name: str = "nce_loss") -> graph_lib.Tensor:
    """Noise-contrastive estimation loss of each example, ``[batch]`` (TF1's ``tf.nn.nce_loss``):
    logistic regression of the true classes against ``num_sampled`` classes drawn by
    ``log_uniform_candidate_sampler`` (or given as ``sampled_values``)."""
    logits, targets = _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                                              sampled_values, remove_accidental_hits, partition_strategy, name, None)
    losses = losses_impl.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits, name="sampled_losses")
    return _sum_rows(losses)


def sampled_softmax_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int, num_classes: int,
                         num_true: int = 1, sampled_values: Any = None, remove_accidental_hits: bool = True,
                         partition_strategy: str = "mod", name: str = "sampled_softmax_loss",
                         seed: Optional[int] = None) -> graph_lib.Tensor:
    """Softmax cross entropy over the true classes and ``num_sampled`` sampled ones, ``[batch]``
    (TF1's ``tf.nn.sampled_softmax_loss``)."""
    logits, targets = _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                                              sampled_values, remove_accidental_hits, partition_strategy, name, seed)
    targets = array_ops.stop_gradient(targets, name="labels_stop_gradient")
    return nn_ops.softmax_cross_entropy_with_logits_v2(labels=targets, logits=logits)

