"""TF1's readers (``tf.TFRecordReader`` and its kin): stateful ops that read the files a queue names.

A reader is a resource of its task, like a queue: it remembers the file it is in and how far
it got, so each ``read`` returns the next record, and when a file ends it dequeues the next
file name from the queue it is given (``string_input_producer``'s), as TensorFlow's
``ReaderBase`` does. Reads of one reader run one at a time in arrival order (several
enqueue threads of ``tf.train.batch`` share one reader); a read waiting for a file name
is an asynchronous kernel, called back when the queue hands one out, and fails with the
queue's OutOfRangeError once the queue is closed and empty: that is how ``num_epochs`` ends
an input pipeline. The file formats are ``kernels/tf_record.py``'s, shared with ``tf.data``.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterator, Optional

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import tf_record
from tensorgrid.kernels.registry import register_kernel

Done = Callable[..., None]
Records = Iterator[tuple[bytes, bytes]]
"""A file's records as (key, value) pairs."""


class _Read:
    """A waiting read: how many records (None: one, as scalars), what it got so far, its callback."""

    def __init__(self, queue: Any, count: Optional[int], done: Done, cancelled: Callable[[], bool]) -> None:
        self.queue = queue
        self.count = count
        self.done = done
        self.cancelled = cancelled
        self.keys: list[bytes] = []
        self.values: list[bytes] = []

    def result(self) -> tuple[Any, Any]:
        if self.count is None:
            return np.array(self.keys[0], dtype=object), np.array(self.values[0], dtype=object)
        keys, values = np.empty(len(self.keys), dtype=object), np.empty(len(self.values), dtype=object)
        keys[:], values[:] = self.keys, self.values
        return keys, values


class _Handoff:
    """A file name asked of the queue: who takes it once it arrives (the read loop, if it is
    still running, else the callback, which resumes it)."""

    def __init__(self) -> None:
        self.arrived: Optional[tuple[Any, Optional[BaseException]]] = None
        self.detached = False


class Reader:
    """What every reader shares: the read loop, the current file, the counters.

    A subclass opens one file as an iterator of (key, value) records (``_open``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.records_produced = 0
        self.work_units_completed = 0
        self._lock = threading.Lock()
        self._reads: collections.deque[_Read] = collections.deque()
        self._busy = False
        self._records: Optional[Records] = None

    def _open(self, path: str) -> Records:
        raise NotImplementedError

    def read_async(self, queue: Any, count: Optional[int], done: Done, cancelled: Callable[[], bool]) -> None:
        """Reads one record (``count=None``) or up to ``count`` from the current file."""
        with self._lock:
            self._reads.append(_Read(queue, count, done, cancelled))
            if self._busy:
                return  # the running loop serves it in turn
            self._busy = True
        self._serve(None)

    def reset(self) -> None:
        with self._lock:
            self._records = None
            self.records_produced = 0
            self.work_units_completed = 0

    def _all_waiting_cancelled(self) -> bool:
        """Asked by the queue (under its lock) while a file name is awaited: when every read
        waiting here belongs to a failed step, the queue gives up the request."""
        with self._lock:
            if self._reads and not all(read.cancelled() for read in self._reads):
                return False
            self._reads.clear()
            self._busy = False
            return True

    def _serve(self, arrived: Optional[tuple[Any, Optional[BaseException]]]) -> None:
        """Serves the waiting reads in order until none is left or a file name must be awaited.

        A file name that arrives is opened even when no read waits any more (their steps
        failed): the next read goes on from it, as TensorFlow's reader keeps its work."""
        failure: Optional[BaseException] = None
        while True:
            if arrived is not None:
                value, failure = arrived
                arrived = None
                if failure is None:
                    try:
                        self._records = self._open(_work_name(value, self.name))
                    except errors.OpError as exc:
                        failure = exc
            with self._lock:
                while self._reads and self._reads[0].cancelled():
                    self._reads.popleft()
                if not self._reads:
                    self._busy = False
                    return
                read = self._reads[0]
            if failure is not None:
                self._finish(read, failure=failure)
                failure = None
                continue
            if self._records is None:
                handoff = _Handoff()
                read.queue.dequeue_async(
                    None, lambda value=None, failure=None, h=handoff: self._on_work(h, value, failure),
                    self._all_waiting_cancelled)
                with self._lock:
                    if handoff.arrived is None:
                        handoff.detached = True
                        return  # the callback resumes the loop
                arrived = handoff.arrived
                continue
            try:
                complete = self._read_records(read)
            except errors.OpError as exc:
                self._records = None
                self._finish(read, failure=exc)
                continue
            if complete:
                self._finish(read)

    def _on_work(self, handoff: _Handoff, value: Any, failure: Optional[BaseException]) -> None:
        with self._lock:
            if not handoff.detached:
                handoff.arrived = (value, failure)
                return
        self._serve((value, failure))

    def _read_records(self, read: _Read) -> bool:
        """Adds records of the current file to ``read``; True once it has what it asked for
        (a ``read_up_to`` is content with fewer when the file ends)."""
        wanted = 1 if read.count is None else read.count
        assert self._records is not None
        while len(read.keys) < wanted:
            record = next(self._records, None)
            if record is None:
                self._records = None
                self.work_units_completed += 1
                return bool(read.keys)
            read.keys.append(record[0])
            read.values.append(record[1])
            self.records_produced += 1
        return True

    def _finish(self, read: _Read, failure: Optional[BaseException] = None) -> None:
        with self._lock:
            if self._reads and self._reads[0] is read:
                self._reads.popleft()
        if failure is not None:
            read.done(failure=failure)
        else:
            read.done(read.result())


def _work_name(value: Any, reader: str) -> str:
    """The file name a queue handed out; TensorFlow's error for anything else."""
    array = np.asarray(value, dtype=object)
    if array.shape != () or not isinstance(array.item(), (bytes, str)):
        raise errors.InvalidArgumentError(
            None, None, f"Expected to dequeue a one-element string tensor for reader {reader}, got {array!r}")
    item = array.item()
    return item.decode() if isinstance(item, bytes) else item


def _keyed(path: str, records: Iterator[bytes], start: int = 0) -> Records:
    """Records keyed "file:n", n counting from ``start``."""
    for number, record in enumerate(records, start):
        yield f"{path}:{number}".encode(), record


class TFRecordReader(Reader):
    """TFRecord files; a record's key is "file:offset", its byte offset in the file."""

    def __init__(self, name: str, compression_type: str) -> None:
        super().__init__(name)
        self.compression_type = compression_type

    def _open(self, path: str) -> Records:
        return self._with_offsets(path, tf_record.read_records(path, self.compression_type))

    @staticmethod
    def _with_offsets(path: str, records: Iterator[bytes]) -> Records:
        offset = 0
        for record in records:
            yield f"{path}:{offset}".encode(), record
            offset += 16 + len(record)


class FixedLengthRecordReader(Reader):
    """Records of ``record_bytes`` bytes between a header and a footer; key "file:n", n from 0."""

    def __init__(self, name: str, record_bytes: int, header_bytes: int, footer_bytes: int, encoding: str) -> None:
        super().__init__(name)
        self.record_bytes, self.header_bytes, self.footer_bytes = record_bytes, header_bytes, footer_bytes
        self.encoding = encoding

    def _open(self, path: str) -> Records:
        return _keyed(path, tf_record.read_fixed_length(path, self.encoding, self.record_bytes, self.header_bytes,
                                                        self.footer_bytes))


class TextLineReader(Reader):
    """Lines of text files without their line ends; key "file:n", n the line number from 1."""

    def __init__(self, name: str, skip_header_lines: int) -> None:
        super().__init__(name)
        self.skip_header_lines = skip_header_lines

    def _open(self, path: str) -> Records:
        lines = tf_record.read_lines(path)
        for _ in range(self.skip_header_lines):
            if next(lines, None) is None:
                break
        return _keyed(path, lines, self.skip_header_lines + 1)


class WholeFileReader(Reader):
    """Each file is one record, its whole content; the key is the file name."""

    def _open(self, path: str) -> Records:
        stream = tf_record.open_for_reading(path, "")
        try:
            content = stream.read()
        finally:
            stream.close()
        return iter([(path.encode(), content)])


def _reader(k: context.KernelContext, step: context.StepContext, kind: type, create: Callable[[str], Reader]) -> Any:
    """The node's reader; the one it found last time while its resource manager has not been
    cleared (the reader op runs on every read of a queue pipeline: one lookup, under a lock, is enough)."""
    cached = k.state.get("reader")
    if cached is not None and cached[0] is step.resources and cached[1] == step.resources.generation:
        return cached[2]
    name = k.attrs["shared_name"] or k.name
    reader = step.resources.lookup_or_create(k.attrs["container"], name, kind, lambda: create(name))
    k.state["reader"] = (step.resources, step.resources.generation, reader)
    return reader


@register_kernel("TFRecordReaderV2", host_only=True)
def _tf_record_reader(k: context.KernelContext, step: context.StepContext) -> Any:
    return _reader(k, step, TFRecordReader, lambda name: TFRecordReader(name, k.attrs["compression_type"]))


@register_kernel("FixedLengthRecordReaderV2", host_only=True)
def _fixed_length_record_reader(k: context.KernelContext, step: context.StepContext) -> Any:
    return _reader(k, step, FixedLengthRecordReader, lambda name: FixedLengthRecordReader(
        name, k.attrs["record_bytes"], k.attrs["header_bytes"], k.attrs["footer_bytes"], k.attrs["encoding"]))


@register_kernel("TextLineReaderV2", host_only=True)
def _text_line_reader(k: context.KernelContext, step: context.StepContext) -> Any:
    return _reader(k, step, TextLineReader, lambda name: TextLineReader(name, k.attrs["skip_header_lines"]))


@register_kernel("WholeFileReaderV2", host_only=True)
def _whole_file_reader(k: context.KernelContext, step: context.StepContext) -> Any:
    return _reader(k, step, WholeFileReader, WholeFileReader)


@register_kernel("ReaderReadV2", is_async=True, host_only=True)
def _read(k: context.KernelContext, step: context.StepContext, done: Done, reader: Reader, queue: Any) -> None:
    reader.read_async(queue, None, done, step.cancelled.is_set)


@register_kernel("ReaderReadUpToV2", is_async=True, host_only=True)
def _read_up_to(k: context.KernelContext, step: context.StepContext, done: Done, reader: Reader, queue: Any,
                num_records: Any) -> None:
    count = int(num_records)
    if count < 1:
        raise errors.InvalidArgumentError(None, None, f"num_records ({count}) must be > 0")
    reader.read_async(queue, count, done, step.cancelled.is_set)


@register_kernel("ReaderNumRecordsProducedV2", host_only=True)
def _num_records_produced(k: context.KernelContext, step: context.StepContext, reader: Reader) -> Any:
    return np.asarray(reader.records_produced, dtype=np.int64)


@register_kernel("ReaderNumWorkUnitsCompletedV2", host_only=True)
def _num_work_units_completed(k: context.KernelContext, step: context.StepContext, reader: Reader) -> Any:
    return np.asarray(reader.work_units_completed, dtype=np.int64)


@register_kernel("ReaderResetV2", host_only=True)
def _reset(k: context.KernelContext, step: context.StepContext, reader: Reader) -> None:
    reader.reset()
