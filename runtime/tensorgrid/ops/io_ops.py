"""TF1's readers: ``tf.TFRecordReader``, ``tf.FixedLengthRecordReader``, ``tf.TextLineReader``, ``tf.WholeFileReader``.

A reader is a stateful resource of its device (``kernels/reader_kernels.py``): ``read(queue)``
returns the next (key, value) record of the file it is in, taking the next file name from
``queue`` when that file ends. Every op on a reader is colocated with it, so a reader placed
on a PS is read there, as TensorFlow's are. Queue pipelines (``tf.train.string_input_producer``,
``tf.train.batch``) feed and drain them from queue-runner threads.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.kernels import tf_record
from tensorgrid.ops import op_util

for _op_type in ("TFRecordReaderV2", "FixedLengthRecordReaderV2", "TextLineReaderV2", "WholeFileReaderV2",
                 "ReaderReadV2", "ReaderReadUpToV2", "ReaderNumRecordsProducedV2", "ReaderNumWorkUnitsCompletedV2",
                 "ReaderResetV2"):
    op_registry.register_op(_op_type, stateful=True)
    op_registry.NotDifferentiable(_op_type)


def _queue_ref(queue: Any) -> graph_lib.Tensor:
    """A queue object's handle, or a handle given as a tensor (TF accepts both)."""
    ref = queue if isinstance(queue, graph_lib.Tensor) else getattr(queue, "queue_ref", None)
    if not isinstance(ref, graph_lib.Tensor) or ref.dtype.base_dtype != dtypes.resource:
        raise TypeError(f"A reader reads file names from a queue (e.g. tf.train.string_input_producer's), "
                        f"got {queue!r}")
    return ref


class ReaderBase:
    """What every reader offers (``tf.ReaderBase``)."""

    def __init__(self, op_type: str, name: Optional[str], attrs: dict[str, Any]) -> None:
        graph = graph_lib.get_default_graph()
        self._reader_ref = op_util.make_tensor(
            op_type, [], dtypes.resource, [], name or op_type,
            {"container": graph.current_container, "shared_name": "", **attrs})

    @property
    def reader_ref(self) -> graph_lib.Tensor:
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        return False

    def _colocated(self) -> Any:
        return self._reader_ref.graph.colocate_with(self._reader_ref.op)

    def read(self, queue: Any, name: Optional[str] = None) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
        """The next record as (key, value) string scalars; OutOfRangeError once ``queue`` is
        closed and every file in it is read."""
        with self._colocated():
            op = op_util.make_op("ReaderReadV2", [self._reader_ref, _queue_ref(queue)],
                                 [(dtypes.string, []), (dtypes.string, [])], name or "ReaderReadV2")
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue: Any, num_records: Any,
                   name: Optional[str] = None) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
        """Up to ``num_records`` records of the current file as (keys, values) vectors: fewer
        when the file ends first."""
        count = op_util.to_tensor(num_records, dtype=dtypes.int64)
        with self._colocated():
            op = op_util.make_op("ReaderReadUpToV2", [self._reader_ref, _queue_ref(queue), count],
                                 [(dtypes.string, [None]), (dtypes.string, [None])], name or "ReaderReadUpToV2")
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name: Optional[str] = None) -> graph_lib.Tensor:
        with self._colocated():
            return op_util.make_tensor("ReaderNumRecordsProducedV2", [self._reader_ref], dtypes.int64, [],
                                       name or "ReaderNumRecordsProducedV2")

    def num_work_units_completed(self, name: Optional[str] = None) -> graph_lib.Tensor:
        with self._colocated():
            return op_util.make_tensor("ReaderNumWorkUnitsCompletedV2", [self._reader_ref], dtypes.int64, [],
                                       name or "ReaderNumWorkUnitsCompletedV2")

    def reset(self, name: Optional[str] = None) -> graph_lib.Operation:
        """Forgets the current file and zeroes the counters."""
        with self._colocated():
            return op_util.make_op("ReaderResetV2", [self._reader_ref], [], name or "ReaderResetV2")


class TFRecordReader(ReaderBase):
    """Reads TFRecord files; keys are "file:offset" (``tf.TFRecordReader``)."""

    def __init__(self, name: Optional[str] = None, options: Any = None) -> None:
        compression = _compression_of(options)
        super().__init__("TFRecordReaderV2", name, {"compression_type": compression})


def _compression_of(options: Any) -> str:
    """A ``tf.io.TFRecordOptions`` (or its compression type) as "", "GZIP" or "ZLIB"."""
    if options is None:
        return ""
    value = getattr(options, "compression_type", options)
    if isinstance(value, int) and not isinstance(value, bool):
        by_number = {0: "", 1: "ZLIB", 2: "GZIP"}
        if value not in by_number:
            raise ValueError(f"Not a valid TFRecordCompressionType: {value!r}; valid are 0 (NONE), 1 (ZLIB), 2 (GZIP)")
        value = by_number[value]
    return tf_record.compression(value)


class FixedLengthRecordReader(ReaderBase):
    """Reads records of ``record_bytes`` bytes after ``header_bytes`` and before
    ``footer_bytes`` of each file; keys are "file:n", n from 0 (``tf.FixedLengthRecordReader``)."""

    def __init__(self, record_bytes: int, header_bytes: Optional[int] = None, footer_bytes: Optional[int] = None,
                 hop_bytes: Optional[int] = None, name: Optional[str] = None, encoding: Optional[str] = None) -> None:
        if isinstance(record_bytes, bool) or not isinstance(record_bytes, int) or record_bytes < 1:
            raise ValueError(f"record_bytes must be a positive int, got {record_bytes!r}")
        sizes = {"header_bytes": header_bytes or 0, "footer_bytes": footer_bytes or 0}
        for what, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{what} must be a non-negative int, got {value!r}")
        if hop_bytes:
            raise ValueError(f"hop_bytes={hop_bytes!r}: overlapping records are not supported, only hop_bytes=0 "
                             "(docs/differences.md)")
        super().__init__("FixedLengthRecordReaderV2", name, {
            "record_bytes": record_bytes, "hop_bytes": 0, **sizes, "encoding": tf_record.compression(encoding)})


class TextLineReader(ReaderBase):
    """Reads the lines of text files, without line ends; keys are "file:line" from 1 (``tf.TextLineReader``)."""

    def __init__(self, skip_header_lines: Optional[int] = None, name: Optional[str] = None) -> None:
        skip = skip_header_lines or 0
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ValueError(f"skip_header_lines must be a non-negative int, got {skip_header_lines!r}")
        super().__init__("TextLineReaderV2", name, {"skip_header_lines": skip})


class WholeFileReader(ReaderBase):
    """Reads each file whole as one record keyed by its name (``tf.WholeFileReader``)."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__("WholeFileReaderV2", name, {})
