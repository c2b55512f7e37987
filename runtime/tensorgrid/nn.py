"""``tf.nn``: the neural-network functions of the TF1 API, re-exported from the ops layer."""

from __future__ import annotations

from tensorgrid.ops.candidate_sampling_ops import (
    compute_accidental_hits, log_uniform_candidate_sampler, nce_loss, sampled_softmax_loss, uniform_candidate_sampler,
)
from tensorgrid.ops.embedding_ops import embedding_lookup, embedding_lookup_sparse
from tensorgrid.ops.losses_impl import sigmoid_cross_entropy_with_logits
from tensorgrid.ops.nn_composites import batch_normalization, elu, l2_normalize, softplus
from tensorgrid.ops.math_ops import sigmoid, tanh
from tensorgrid.ops.nn_ops import (
    avg_pool, bias_add, conv2d, conv2d_backprop_filter, conv2d_backprop_input, dropout, in_top_k, l2_loss,
    leaky_relu, log_softmax, max_pool, moments, relu, relu6, softmax, softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2, sparse_softmax_cross_entropy_with_logits, xw_plus_b,
)

__all__ = [
    "compute_accidental_hits", "log_uniform_candidate_sampler", "nce_loss", "sampled_softmax_loss",
    "uniform_candidate_sampler",
    "avg_pool", "batch_normalization", "bias_add", "elu", "l2_normalize", "softplus", "conv2d", "conv2d_backprop_filter", "conv2d_backprop_input", "dropout",
    "embedding_lookup", "embedding_lookup_sparse", "in_top_k", "l2_loss", "leaky_relu", "log_softmax", "max_pool",
    "moments", "relu", "relu6", "sigmoid", "sigmoid_cross_entropy_with_logits", "softmax", "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits", "tanh", "xw_plus_b",
]
