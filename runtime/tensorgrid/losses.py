"""``tf.losses``: TF1's loss functions and the losses collection, re-exported from the ops layer."""

from __future__ import annotations

from tensorgrid.ops.losses_impl import (
    Reduction, absolute_difference, add_loss, compute_weighted_loss, cosine_distance, get_losses, get_regularization_loss,
    get_regularization_losses, get_total_loss, hinge_loss, huber_loss, log_loss, mean_pairwise_squared_error,
    mean_squared_error, sigmoid_cross_entropy,
    softmax_cross_entropy, sparse_softmax_cross_entropy,
)

__all__ = [
    "Reduction", "absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance", "get_losses", "get_regularization_loss",
    "get_regularization_losses", "get_total_loss", "hinge_loss", "huber_loss", "log_loss",
    "mean_pairwise_squared_error", "mean_squared_error",
    "sigmoid_cross_entropy", "softmax_cross_entropy", "sparse_softmax_cross_entropy",
]
