"""The TFRecord file format: framing, CRC-32C, compression; what event files and the file datasets share.

A record is its length (8 bytes, little-endian), the masked CRC-32C of those 8 bytes,
the data, and the masked CRC-32C of the data; a file is records back to back, the
whole file optionally a GZIP or ZLIB stream (TensorFlow's ``compression_type``).
Reading checks both checksums, so a truncated or corrupted file is a DataLossError
naming the file and offset, never silently short data. The CRC is Google's C
implementation (the ``google-crc32c`` wheel, hardware CRC instructions where the
processor has them); where that wheel has no compiled extension for the platform,
a table-driven Python CRC gives the same checksums at about 4 MB/s
(bench/README.md, "Reading TFRecord files").
"""

from __future__ import annotations

import gzip
import itertools
import os
import struct
import zlib
from typing import IO, Any, Iterator, Optional

from tensorgrid.framework import errors

try:
    import google_crc32c
except ImportError:  # the wheel is a dependency; only a broken install lacks it
    google_crc32c = None  # type: ignore[assignment]

COMPRESSION_TYPES = ("", "GZIP", "ZLIB")
"""What ``compression_type`` may be (None means "")."""


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def python_crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) in Python, one table lookup per byte: the fallback."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _native_crc32c(data: bytes) -> int:
    return int(google_crc32c.value(data))


CRC32C_IMPLEMENTATION = "c" if google_crc32c is not None and google_crc32c.implementation == "c" else "python"
"""Which CRC-32C runs here: "c" (google-crc32c's compiled extension) or "python" (the fallback;
google-crc32c's own pure-Python fallback is no faster than ours)."""


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecord files."""
    return _native_crc32c(data) if CRC32C_IMPLEMENTATION == "c" else python_crc32c(data)


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One TFRecord: the framing TensorFlow's record reader checks."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def compression(value: Any) -> str:
    """``compression_type`` checked: None, "", "GZIP" or "ZLIB"."""
    name = "" if value is None else value
    if isinstance(name, bytes):
        name = name.decode()
    if name not in COMPRESSION_TYPES:
        raise ValueError(f"Not a valid compression_type: {value!r}; valid are None, '', 'GZIP' and 'ZLIB'")
    return str(name)


class _ZlibReader:
    """A ZLIB-compressed file read as a stream of its uncompressed bytes."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj()
        self._pending = b""

    def read(self, size: int) -> bytes:
        while len(self._pending) < size and not self._inflate.eof:
            chunk = self._raw.read(1 << 16)
            self._pending += self._inflate.decompress(chunk) if chunk else self._inflate.flush()
            if not chunk:
                break
        out, self._pending = self._pending[:size], self._pending[size:]
        return out

    def close(self) -> None:
        self._raw.close()


def open_for_reading(path: str, compression_type: str) -> Any:
    """The file's (uncompressed) bytes; a missing file is a NotFoundError naming it."""
    try:
        raw = open(path, "rb")  # closed by the caller
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except OSError as exc:
        raise errors.PermissionDeniedError(None, None, f"{path}: {exc.strerror}") from None
    if compression_type == "GZIP":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression_type == "ZLIB":
        return _ZlibReader(raw)
    return raw


class _ZlibWriter:
    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._deflate = zlib.compressobj()

    def write(self, data: bytes) -> None:
        self._raw.write(self._deflate.compress(data))

    def flush(self) -> None:
        self._raw.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
        self._raw.flush()

    def close(self) -> None:
        self._raw.write(self._deflate.flush())
        self._raw.close()


def open_for_writing(path: str, compression_type: str) -> Any:
    raw = open(path, "wb")  # closed by the caller
    if compression_type == "GZIP":
        return gzip.GzipFile(fileobj=raw, mode="wb")
    if compression_type == "ZLIB":
        return _ZlibWriter(raw)
    return raw


READ_CHUNK_BYTES = 1 << 20
"""How much of a file ``read_records`` reads at once: records are cut out of the chunk."""

_HEADER = struct.Struct("<QI")
_CHECKSUM = struct.Struct("<I")


def _unmasked(masked: int) -> int:
    """The CRC-32C that ``masked_crc`` turned into ``masked``."""
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def read_records(path: str, compression_type: str = "") -> Iterator[bytes]:
    """The records of one file in order, each checked against its two checksums.

    The file is read a chunk (``READ_CHUNK_BYTES``) at a time and each record is cut out of
    the chunk with one copy, the bytes it is returned as; a header equal to the previous
    record's (records of one size) is not checked again. The records of a chunk are handed
    on together (the iterator steps through them without a Python call per record); those
    before a bad record all come before its error. A chunk that cannot be read (a corrupt
    compressed stream) fails the first record that needs its bytes, as reading record by
    record would."""
    return itertools.chain.from_iterable(_batches_of_records(path, compression_type))


def _batches_of_records(path: str, compression_type: str) -> Iterator[list[bytes]]:
    stream = open_for_reading(path, compression_type)
    crc = google_crc32c.value if CRC32C_IMPLEMENTATION == "c" else python_crc32c
    unpack_header, unpack_checksum = _HEADER.unpack_from, _CHECKSUM.unpack_from
    buffer, position, buffer_offset = b"", 0, 0  # buffer_offset: of buffer[0] in the (uncompressed) file
    # The header last checked, as its two numbers; to start with, an empty record's (valid).
    checked_length, checked_length_crc = _HEADER.unpack(frame(b"")[:12])
    failure: Optional[BaseException] = None
    ended = False
    records: list[bytes] = []

    def fill(needed: int) -> None:
        """Reads until ``needed`` bytes from ``position`` on are in the buffer, or the file ends."""
        nonlocal buffer, position, buffer_offset, failure, ended
        pieces = [buffer[position:]]
        held = len(pieces[0])
        while held < needed and not ended and failure is None:
            try:
                chunk = stream.read(max(READ_CHUNK_BYTES, needed - held))
            except (OSError, EOFError, zlib.error) as exc:
                failure = exc
                break
            ended = not chunk
            pieces.append(chunk)
            held += len(chunk)
        buffer, position, buffer_offset = b"".join(pieces), 0, buffer_offset + position

    def short(needed: int, what: str, start: int) -> errors.DataLossError:
        offset = buffer_offset + position
        if failure is not None:
            return errors.DataLossError(None, None, f"{path}: cannot decompress at record offset {offset}: {failure}")
        return errors.DataLossError(None, None, f"truncated record at {offset} in {path}: {what} needs {needed} bytes, "
                                    f"{len(buffer) - start} left")

    try:
        while True:
            if len(buffer) - position < 12:
                if records:
                    yield records
                    records = []
                fill(12)
                if position == len(buffer):
                    if failure is not None:
                        raise short(12, "the header", position)
                    return
                if len(buffer) < 12:
                    raise short(12 - len(buffer), "the header", len(buffer))
            length, length_crc = unpack_header(buffer, position)
            if length != checked_length or length_crc != checked_length_crc:
                if _unmasked(length_crc) != crc(buffer[position:position + 8]):
                    raise errors.DataLossError(None, None, f"corrupted record at {buffer_offset + position} in {path} "
                                               "(Is this even a TFRecord file?)")
                checked_length, checked_length_crc = length, length_crc
            end = position + 12 + length
            if len(buffer) < end + 4:
                if records:
                    yield records
                    records = []
                fill(16 + length)
                end = 12 + length
                if len(buffer) < end:
                    raise short(length, "the data", 12)
                if len(buffer) < end + 4:
                    raise short(4, "the data's checksum", end)
            data = buffer[end - length:end]
            data_crc = crc(data)
            if (((data_crc >> 15) | (data_crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF != unpack_checksum(buffer, end)[0]:
                raise errors.DataLossError(None, None, f"corrupted record at {buffer_offset + position} in {path}: "
                                           "the data's checksum does not match")
            records.append(data)
            position = end + 4
    except errors.DataLossError:
        if records:
            yield records  # the good records before the bad one, then its error
        raise
    finally:
        stream.close()


def read_lines(path: str, compression_type: str = "") -> Iterator[bytes]:
    """The lines of a text file without their line ends ("\\n", or "\\r\\n"), as TextLineDataset gives them."""
    stream = open_for_reading(path, compression_type)
    try:
        pending = b""
        while True:
            try:
                chunk = stream.read(1 << 16)
            except (OSError, EOFError, zlib.error) as exc:
                raise errors.DataLossError(None, None, f"{path}: cannot decompress: {exc}") from None
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                yield line[:-1] if line.endswith(b"\r") else line
        if pending:
            yield pending[:-1] if pending.endswith(b"\r") else pending
    finally:
        stream.close()


def read_fixed_length(path: str, compression_type: str, record_bytes: int, header_bytes: int,
                      footer_bytes: int, buffer_size: int = 1 << 18) -> Iterator[bytes]:
    """The ``record_bytes``-long records between a file's header and footer, in order
    (FixedLengthRecordDataset). A body that is not a whole number of records is an error, as
    in TensorFlow: InvalidArgumentError before the first record of an uncompressed file (its
    size is known), DataLossError after the last whole record of a compressed one."""
    if not compression_type:
        try:
            size = os.path.getsize(path)
        except OSError:
            size = None  # open_for_reading names the problem
        if size is not None and (size < header_bytes + footer_bytes or
                                 (size - header_bytes - footer_bytes) % record_bytes):
            raise errors.InvalidArgumentError(None, None, _not_whole_records(
                path, header_bytes, footer_bytes, size - header_bytes - footer_bytes, record_bytes))
    stream = open_for_reading(path, compression_type)
    chunk = max(buffer_size, record_bytes + footer_bytes)
    try:
        pending = b""
        ended = False
        skipped = 0
        while not ended:
            try:
                data = stream.read(chunk)
            except (OSError, EOFError, zlib.error) as exc:
                raise errors.DataLossError(None, None, f"{path}: cannot decompress: {exc}") from None
            ended = not data
            if skipped < header_bytes:
                taken = min(header_bytes - skipped, len(data))
                skipped, data = skipped + taken, data[taken:]
            pending += data
            usable = (len(pending) - footer_bytes) // record_bytes * record_bytes if len(pending) > footer_bytes else 0
            for offset in range(0, usable, record_bytes):
                yield pending[offset:offset + record_bytes]
            pending = pending[usable:]
        if skipped < header_bytes or len(pending) != footer_bytes:
            raise errors.DataLossError(None, None, _not_whole_records(
                path, header_bytes, footer_bytes, len(pending) - footer_bytes - (header_bytes - skipped), record_bytes))
    finally:
        stream.close()


def _not_whole_records(path: str, header_bytes: int, footer_bytes: int, body: int, record_bytes: int) -> str:
    if body < 0:
        return (f"input file \"{path}\" is shorter than its header ({header_bytes} bytes) and footer "
                f"({footer_bytes} bytes) together")
    return (f"Excluding the header ({header_bytes} bytes) and footer ({footer_bytes} bytes), input file \"{path}\" "
            f"has body length {body} bytes, which is not an exact multiple of the record length ({record_bytes} bytes).")
