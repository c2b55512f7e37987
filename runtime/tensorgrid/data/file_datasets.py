"""``tf.data.TFRecordDataset`` and ``tf.data.TextLineDataset``: datasets read from files.

Each is a source stage naming its compression, whose one input is the file names (a
string, a list of strings, or a string tensor, e.g. a placeholder fed when an
initializable iterator is initialized). The files are read on the task where the
iterator runs, one after another, or ``num_parallel_reads`` at a time interleaved
record by record as TensorFlow does. The format lives in ``kernels/tf_record.py``.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.data import dataset_ops
from tensorgrid.framework import dtypes
from tensorgrid.framework import tensor_shape
from tensorgrid.kernels import tf_record
from tensorgrid.ops import array_ops
from tensorgrid.ops import op_util


def _filenames(filenames: Any, dataset: str) -> Any:
    names = op_util.to_tensor(filenames, dtype=dtypes.string)
    if names.shape.ndims is not None and names.shape.ndims > 1:
        raise TypeError(f"{dataset}: filenames must be a string scalar or vector, got shape {names.shape}")
    return array_ops.reshape(names, [-1])


def _buffer_size(buffer_size: Any, dataset: str) -> None:
    if buffer_size is not None and (not isinstance(buffer_size, int) or buffer_size < 0):
        raise ValueError(f"{dataset}: buffer_size must be a non-negative integer or None, got {buffer_size!r}")


class TFRecordDataset(dataset_ops.Dataset):
    """The records of TFRecord files, each a string scalar (``tf.data.TFRecordDataset``)."""

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        _buffer_size(buffer_size, "TFRecordDataset")
        parallel = 1
        if num_parallel_reads is not None:
            parallel = dataset_ops.positive(num_parallel_reads, "num_parallel_reads", allow_autotune=True)
        stage = ["tfrecord_files", tf_record.compression(compression_type), parallel]
        super().__init__([stage], [_filenames(filenames, "TFRecordDataset")], None, [dtypes.string],
                         [tensor_shape.TensorShape([])])


class TextLineDataset(dataset_ops.Dataset):
    """The lines of text files without their line ends, each a string scalar (``tf.data.TextLineDataset``)."""

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        _buffer_size(buffer_size, "TextLineDataset")
        parallel = 1
        if num_parallel_reads is not None:
            parallel = dataset_ops.positive(num_parallel_reads, "num_parallel_reads", allow_autotune=True)
        stage = ["text_line_files", tf_record.compression(compression_type), parallel]
        super().__init__([stage], [_filenames(filenames, "TextLineDataset")], None, [dtypes.string],
                         [tensor_shape.TensorShape([])])
