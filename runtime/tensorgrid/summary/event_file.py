"""``tf.summary.FileWriter``: TensorBoard event files.

An event file is a TFRecord file (each record: length, masked CRC-32C of the length,
the bytes, masked CRC-32C of the bytes) of serialized ``tensorflow.Event`` messages; the
first says ``brain.Event:2``. TensorBoard and ``tf.compat.v1.train.summary_iterator``
read what this writes. Events are written when added and flushed by ``flush()``,
``close()`` or every ``flush_secs``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Optional

import numpy as np

from tensorgrid import monitoring
from tensorgrid.client import config
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.kernels import summary_kernels
from tensorgrid.kernels import tf_record
from tensorgrid.summary import tf_graph_def


def tfrecord(data: bytes) -> bytes:
    """One TFRecord: the framing TensorFlow's record reader checks."""
    return tf_record.frame(data)


def event(wall_time: float, step: int = 0, file_version: Optional[str] = None,
          summary: Optional[bytes] = None, graph_def: Optional[bytes] = None,
          tagged_run_metadata: Optional[bytes] = None) -> bytes:
    """A serialized ``tensorflow.Event``."""
    out = summary_kernels.double_field(1, wall_time)
    if step:
        out += summary_kernels.varint(2 << 3) + summary_kernels.varint(step & 0xFFFFFFFFFFFFFFFF)
    if file_version is not None:
        out += summary_kernels.length_delimited(3, file_version.encode())
    if graph_def is not None:
        out += summary_kernels.length_delimited(4, graph_def)
    if summary is not None:
        out += summary_kernels.length_delimited(5, summary)
    if tagged_run_metadata is not None:
        out += summary_kernels.length_delimited(8, tagged_run_metadata)
    return out


def _run_metadata_bytes(run_metadata: Any) -> bytes:
    """A ``RunMetadata`` serialized: a protobuf's own bytes; tensorgrid's ``tf.RunMetadata`` holds no
    step statistics (a traced run records none, docs/differences.md), so it is the empty message."""
    serialize = getattr(run_metadata, "SerializeToString", None)
    if callable(serialize):
        return bytes(serialize())
    if isinstance(run_metadata, config.RunMetadata):
        return b""
    raise TypeError(f"add_run_metadata takes a tf.RunMetadata, got {type(run_metadata).__name__}")


def _summary_bytes(summary: Any) -> bytes:
    serialize = getattr(summary, "SerializeToString", None)
    if callable(serialize):
        return bytes(serialize())
    if isinstance(summary, np.ndarray) and summary.shape == () and summary.dtype == object:
        summary = summary[()]
    if isinstance(summary, bytes):
        return summary
    raise TypeError(f"add_summary takes a serialized Summary (the value of a summary op) or a Summary proto, "
                    f"got {type(summary).__name__}")


class FileWriter:
    """Writes summaries to an event file in ``logdir`` (``tf.summary.FileWriter``).

    ``graph`` (or ``graph_def``) is written first, in TensorFlow's ``GraphDef`` layout, for
    TensorBoard's graph view (summary/tf_graph_def.py says what it holds).
    """

    def __init__(self, logdir: str, graph: Any = None, max_queue: int = 10, flush_secs: float = 120,
                 graph_def: Any = None, filename_suffix: Optional[str] = None, session: Any = None) -> None:
        if not isinstance(logdir, (str, os.PathLike)) or not str(logdir):
            raise ValueError(f"logdir must be a directory path, got {logdir!r}")
        if flush_secs <= 0:
            raise ValueError(f"flush_secs must be positive, got {flush_secs}")
        self._logdir = str(logdir)
        self._suffix = filename_suffix or ""
        self._flush_secs = flush_secs
        self._lock = threading.Lock()
        self._run_metadata_tags: set[str] = set()
        self._file: Any = None
        self._last_flush = 0.0
        self._open()
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def _open(self) -> None:
        os.makedirs(self._logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}{self._suffix}"
        self._path = os.path.join(self._logdir, name)
        self._file = open(self._path, "ab")
        self._last_flush = time.monotonic()
        self._write(event(time.time(), file_version="brain.Event:2"))

    def _write(self, serialized_event: bytes) -> None:
        with self._lock:
            if self._file is None:
                raise ValueError(f"FileWriter for {self._logdir} is closed; call reopen() first")
            self._file.write(tfrecord(serialized_event))
            if time.monotonic() - self._last_flush >= self._flush_secs:
                self._file.flush()
                self._last_flush = time.monotonic()

    def get_logdir(self) -> str:
        return self._logdir

    @property
    def event_file_path(self) -> str:
        """The file this writer writes (a new one after each ``reopen``)."""
        return self._path

    def add_summary(self, summary: Any, global_step: Optional[int] = None) -> None:
        """Writes a Summary; its scalars are also this process's ``tensorgrid_summary_scalar``
        metrics (the operator shows the loss from there)."""
        serialized = _summary_bytes(summary)
        self._write(event(time.time(), int(global_step or 0), summary=serialized))
        monitoring.record_summary_scalars(summary_kernels.scalar_values(serialized))
        if global_step is not None:
            monitoring.record_global_step(int(global_step))

    def add_graph(self, graph: Any, global_step: Optional[int] = None, graph_def: Any = None) -> None:
        """Writes ``graph`` (a ``tf.Graph``), or ``graph_def``, for TensorBoard's graph view."""
        source = graph if graph is not None else graph_def
        if source is None:
            raise ValueError("add_graph needs a graph or a graph_def, got neither")
        if not isinstance(source, graph_def_lib.GraphDef) and not callable(getattr(source, "as_graph_def", None)):
            raise TypeError(f"add_graph takes a tf.Graph or its GraphDef, got {type(source).__name__}")
        self._write(event(time.time(), int(global_step or 0), graph_def=tf_graph_def.serialized_graph_def(source)))

    def add_run_metadata(self, run_metadata: Any, tag: str, global_step: Optional[int] = None) -> None:
        """Writes ``run_metadata`` (what ``session.run(..., run_metadata=...)`` filled) under ``tag``, for
        TensorBoard's per-run view; a tag is written once per writer, as in TensorFlow."""
        if tag in self._run_metadata_tags:
            raise ValueError("The provided tag was already used for this event type")
        self._run_metadata_tags.add(tag)
        tagged = summary_kernels.length_delimited(1, str(tag).encode()) + summary_kernels.length_delimited(
            2, _run_metadata_bytes(run_metadata))
        self._write(event(time.time(), int(global_step or 0), tagged_run_metadata=tagged))

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                self._last_flush = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def reopen(self) -> None:
        """Starts a new event file after ``close()``; does nothing while open."""
        if self._file is None:
            self._open()

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FileWriterCache:
    """One ``FileWriter`` per log directory for the process (``tf.summary.FileWriterCache``):
    the hooks of a ``MonitoredTrainingSession`` (the checkpoint hook's graph, the summary
    hook's values) write into one event file, as TensorFlow's do."""

    _writers: dict[str, FileWriter] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, logdir: str) -> FileWriter:
        """The directory's writer, made on first use (reopened if it was closed)."""
        key = os.path.abspath(str(logdir))
        with cls._lock:
            writer = cls._writers.get(key)
            if writer is None:
                writer = cls._writers[key] = FileWriter(key)
            writer.reopen()
            return writer

    @classmethod
    def clear(cls) -> None:
        """Closes and forgets every cached writer."""
        with cls._lock:
            writers, cls._writers = list(cls._writers.values()), {}
        for writer in writers:
            writer.close()
