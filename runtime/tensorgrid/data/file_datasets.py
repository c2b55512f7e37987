"""``tf.data.TFRecordDataset``, ``TextLineDataset`` and ``FixedLengthRecordDataset``: datasets read from files.

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


def _byte_count(value: Any, what: str, minimum: int) -> int:
    count = op_util.static_int(value, "FixedLengthRecordDataset", what)
    if count < minimum:
        raise ValueError(f"FixedLengthRecordDataset: {what} must be at least {minimum}, got {count}")
    return count


class FixedLengthRecordDataset(dataset_ops.Dataset):
    """Records of ``record_bytes`` bytes each, between a file's ``header_bytes`` and ``footer_bytes``,
    each a string scalar (``tf.data.FixedLengthRecordDataset``: binary formats such as CIFAR-10's;
    ``tf.io.decode_raw`` turns a record into numbers). The byte counts must be known when the graph
    is built; a file whose body is not whole records is an error (``kernels/tf_record.py``)."""

    def __init__(self, filenames: Any, record_bytes: Any, header_bytes: Any = None, footer_bytes: Any = None,
                 buffer_size: Any = None, compression_type: Any = None, num_parallel_reads: Any = None) -> None:
        _buffer_size(buffer_size, "FixedLengthRecordDataset")
        parallel = 1
        if num_parallel_reads is not None:
            parallel = dataset_ops.positive(num_parallel_reads, "num_parallel_reads", allow_autotune=True)
        stage = ["fixed_length_files", tf_record.compression(compression_type), parallel,
                 _byte_count(record_bytes, "record_bytes", 1),
                 0 if header_bytes is None else _byte_count(header_bytes, "header_bytes", 0),
                 0 if footer_bytes is None else _byte_count(footer_bytes, "footer_bytes", 0),
                 buffer_size or 1 << 18]
        super().__init__([stage], [_filenames(filenames, "FixedLengthRecordDataset")], None, [dtypes.string],
                         [tensor_shape.TensorShape([])])
