"""``tf.layers``: TF1's layers, functions and classes, building graphs with the ops layer.

Each layer keeps its variables in its own variable scope, made with ``tf.get_variable`` and named
as TensorFlow names them (``dense/kernel``, ``dense_1/kernel``, ``conv2d/bias``,
``batch_normalization/moving_mean``), so ``reuse``, scope initializers, regularizers and
``replica_device_setter`` apply to them as in TF1 programs (``base`` has the rules).
"""

from __future__ import annotations

from tensorgrid.layers.base import Layer
from tensorgrid.layers.convolutional import (
    AveragePooling2D, Conv2D, MaxPooling2D, average_pooling2d, conv2d, max_pooling2d,
)
from tensorgrid.layers.core import Dense, Dropout, Flatten, dense, dropout, flatten
from tensorgrid.layers.normalization import BatchNormalization, batch_normalization

__all__ = [
    "AveragePooling2D", "BatchNormalization", "Conv2D", "Dense", "Dropout", "Flatten", "Layer", "MaxPooling2D",
    "average_pooling2d", "batch_normalization", "conv2d", "dense", "dropout", "flatten", "max_pooling2d",
]
