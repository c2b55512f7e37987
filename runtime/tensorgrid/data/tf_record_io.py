"""``tf.io.TFRecordWriter`` (also ``tf.python_io``), ``TFRecordOptions`` and ``tf_record_iterator``.

Writes TFRecord files that TensorFlow reads (the framing and checksums of
``kernels/tf_record.py``, optionally GZIP or ZLIB compressed) and reads them back in
the client's process, checking every record.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from tensorgrid.kernels import tf_record


class TFRecordCompressionType:
    """TF1's names for the compression of a TFRecord file."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_BY_NUMBER = {TFRecordCompressionType.NONE: "", TFRecordCompressionType.ZLIB: "ZLIB",
              TFRecordCompressionType.GZIP: "GZIP"}


class TFRecordOptions:
    """How a TFRecord file is compressed (``tf.io.TFRecordOptions``)."""

    def __init__(self, compression_type: Any = None) -> None:
        if isinstance(compression_type, int) and not isinstance(compression_type, bool):
            if compression_type not in _BY_NUMBER:
                raise ValueError(f"Not a valid TFRecordCompressionType: {compression_type!r}; valid are 0 (NONE), "
                                 "1 (ZLIB) and 2 (GZIP)")
            compression_type = _BY_NUMBER[compression_type]
        self.compression_type = tf_record.compression(compression_type)

    @classmethod
    def get_compression_type_string(cls, options: Any) -> str:
        if options is None:
            return ""
        return options.compression_type if isinstance(options, TFRecordOptions) else TFRecordOptions(options).compression_type


class TFRecordWriter:
    """Writes records to a TFRecord file; a context manager (``tf.io.TFRecordWriter``)."""

    def __init__(self, path: str, options: Any = None) -> None:
        self._path = str(path)
        self._file: Optional[Any] = tf_record.open_for_writing(
            self._path, TFRecordOptions.get_compression_type_string(options))

    def write(self, record: Any) -> None:
        if self._file is None:
            raise ValueError(f"TFRecordWriter for {self._path} is closed")
        if isinstance(record, str):
            record = record.encode()
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(f"TFRecordWriter.write takes bytes (e.g. a serialized tf.train.Example), "
                            f"got {type(record).__name__}")
        self._file.write(tf_record.frame(bytes(record)))

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tf_record_iterator(path: str, options: Any = None) -> Iterator[bytes]:
    """The records of a TFRecord file, checked, as bytes (``tf.io.tf_record_iterator``)."""
    return tf_record.read_records(str(path), TFRecordOptions.get_compression_type_string(options))
