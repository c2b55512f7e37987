"""Real data sets with no download at run time, and fixed-size shuffled mini-batches.

``TFRecordDataset``, ``TextLineDataset`` and ``FixedLengthRecordDataset`` read files (``file_datasets``);
``tensorgrid.data.load_digits()`` gives the 8x8 handwritten digits that ship inside
scikit-learn (``pip install 'tensorgrid[data]'``), split into train and test;
``load_mnist(directory)`` reads MNIST's IDX files from disk; ``Batches`` serves
``next_batch()`` as TF1's tutorials did. ``Dataset`` and the iterators are ``tf.data``
(TF1's API): input pipelines that run inside the graph (``dataset_ops``).
"""

from __future__ import annotations

import types as _types

from tensorgrid.data.dataset_ops import (
    AUTOTUNE, Dataset, Iterator, make_initializable_iterator, make_one_shot_iterator,
)
from tensorgrid.data.batching import Batches, batches, epoch_batches
from tensorgrid.data.file_datasets import FixedLengthRecordDataset, TextLineDataset, TFRecordDataset
from tensorgrid.data.digits import (
    Examples, TrainTestSplit, digits_csv_path, load_digits, read_digits_csv, stratified_split,
)
from tensorgrid.data.mnist_idx import (
    IdxFormatError, load_mnist, read_idx, read_mnist_images, read_mnist_labels, write_idx,
)

from tensorgrid.data.dynamic_sharding import DynamicShardsHook, dynamic_shard_records, dynamic_shards

experimental = _types.SimpleNamespace(AUTOTUNE=AUTOTUNE, DynamicShardsHook=DynamicShardsHook,
                                      dynamic_shard_records=dynamic_shard_records, dynamic_shards=dynamic_shards)
"""``tf.data.experimental``: AUTOTUNE; ``dynamic_shards`` (tensorgrid's: shards handed out at run time, docs/data.md)."""

__all__ = [
    "AUTOTUNE", "Dataset", "FixedLengthRecordDataset", "Iterator", "TFRecordDataset", "TextLineDataset", "experimental", "make_initializable_iterator", "make_one_shot_iterator",
    "Batches", "Examples", "IdxFormatError", "TrainTestSplit", "batches", "digits_csv_path", "epoch_batches",
    "load_digits", "load_mnist", "read_digits_csv", "read_idx", "read_mnist_images", "read_mnist_labels",
    "stratified_split", "write_idx",
]
