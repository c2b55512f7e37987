"""The sorted string table that TensorFlow's checkpoint index (``P.index``) is: LevelDB's table format.

TensorFlow's V2 checkpoints (``tensorflow_bundle``) keep their metadata in one of these tables: keys
in byte order, each with a serialized protobuf as its value. The layout (LevelDB's, as
``tensorflow/core/lib/io/table*`` writes it):

- data blocks, each a run of entries ``varint shared | varint unshared | varint value length | the
  key's unshared bytes | the value``, where ``shared`` counts the bytes the key has in common with
  the previous key; every 16th entry (a restart point) repeats its whole key. After the entries,
  the restart points' offsets (uint32 each) and their count (uint32);
- after each block a trailer: one byte of compression type (0: none, what TensorFlow writes) and
  the masked CRC-32C of the block and that byte;
- a metaindex block (empty: TensorFlow writes no filters), then the index block: one entry per data
  block, its key at least the block's last key, its value the block's handle (varint offset,
  varint size);
- a 48-byte footer: the metaindex and index handles, zero padding to 40 bytes, and the magic
  number 0xdb4775248b80fb57 (little-endian).

The index of a checkpoint is small (one entry per tensor), so the table is read whole.
"""

from __future__ import annotations

import struct

from tensorgrid.framework import errors
from tensorgrid.kernels import tf_record

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
NO_COMPRESSION = 0
BLOCK_SIZE = 256 * 1024
"""A data block is closed once it holds this many bytes (TensorFlow's table option block_size)."""
RESTART_INTERVAL = 16


def varint(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf/LevelDB varint: 7 bits a byte, least significant first."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The varint at ``position`` and the position after it; ValueError when it runs past the end."""
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError(f"a varint runs past the end of its {len(data)} bytes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def is_table(path: str) -> bool:
    """Whether the file at ``path`` ends with the table magic number (a TensorFlow index, not JSON)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            if f.tell() < FOOTER_SIZE:
                return False
            f.seek(-8, 2)
            return bool(struct.unpack("<Q", f.read(8))[0] == MAGIC)
    except OSError:
        return False


# ---------------------------------------------------------------------- reading

def read_table(path: str) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` of the table in file ``path``, in order; DataLossError naming the file
    when a block's checksum, a handle or an entry is wrong."""
    with open(path, "rb") as f:
        content = f.read()
    try:
        if len(content) < FOOTER_SIZE:
            raise ValueError(f"{len(content)} bytes is shorter than a table's {FOOTER_SIZE}-byte footer")
        footer = content[-FOOTER_SIZE:]
        if struct.unpack("<Q", footer[-8:])[0] != MAGIC:
            raise ValueError("not an sstable (bad magic number)")
        _, position = _read_handle(footer, 0)  # the metaindex: TensorFlow's tables have no filter to read
        index_handle, _ = _read_handle(footer, position)
        entries = []
        for _, handle_bytes in _block_entries(_read_block(content, index_handle)):
            handle, _ = _read_handle(handle_bytes, 0)
            entries.extend(_block_entries(_read_block(content, handle)))
    except (ValueError, struct.error) as e:
        raise errors.DataLossError(None, None, f"Unable to read file ({path}): it is corrupted or not a "
                                               f"TensorFlow checkpoint index: {e}") from None
    keys = [key for key, _ in entries]
    if keys != sorted(keys) or len(set(keys)) != len(keys):
        raise errors.DataLossError(None, None, f"Unable to read file ({path}): its keys are not in order")
    return entries


def _read_handle(data: bytes, position: int) -> tuple[tuple[int, int], int]:
    offset, position = read_varint(data, position)
    size, position = read_varint(data, position)
    return (offset, size), position


def _read_block(content: bytes, handle: tuple[int, int]) -> bytes:
    offset, size = handle
    end = offset + size
    if offset < 0 or end + BLOCK_TRAILER_SIZE > len(content) - FOOTER_SIZE:
        raise ValueError(f"block at {offset} of {size} bytes runs past the end of the file")
    block, kind = content[offset:end], content[end]
    stored = struct.unpack("<I", content[end + 1:end + BLOCK_TRAILER_SIZE])[0]
    if stored != tf_record.masked_crc(content[offset:end + 1]):
        raise ValueError(f"block checksum mismatch (the block at offset {offset}, {size} bytes)")
    if kind != NO_COMPRESSION:
        raise ValueError(f"block at {offset} is compressed (type {kind}); TensorFlow writes checkpoint "
                         "indexes uncompressed and this reader reads only those")
    return block


def _block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise ValueError(f"a block of {len(block)} bytes has no restart count")
    restarts = struct.unpack("<I", block[-4:])[0]
    limit = len(block) - 4 - 4 * restarts
    if limit < 0:
        raise ValueError(f"a block of {len(block)} bytes cannot hold {restarts} restart points")
    entries = []
    key = b""
    position = 0
    while position < limit:
        shared, position = read_varint(block, position)
        unshared, position = read_varint(block, position)
        value_length, position = read_varint(block, position)
        if shared > len(key) or position + unshared + value_length > limit:
            raise ValueError(f"a block entry at {position} does not fit its block")
        key = key[:shared] + block[position:position + unshared]
        position += unshared
        entries.append((key, block[position:position + value_length]))
        position += value_length
    return entries


# ---------------------------------------------------------------------- writing

def build_table(entries: list[tuple[bytes, bytes]]) -> bytes:
    """The table file holding ``entries`` (keys strictly increasing), uncompressed, as TensorFlow
    writes a checkpoint index."""
    keys = [key for key, _ in entries]
    if any(a >= b for a, b in zip(keys, keys[1:])):
        raise ValueError("table keys must be unique and in increasing byte order")
    out = bytearray()
    index: list[tuple[bytes, bytes]] = []
    pending: list[tuple[bytes, bytes]] = []
    pending_size = 0
    for key, value in entries:
        pending.append((key, value))
        pending_size += len(key) + len(value)
        if pending_size >= BLOCK_SIZE:
            index.append((key, _append_block(out, _block(pending, RESTART_INTERVAL))))
            pending, pending_size = [], 0
    if pending or not index:
        index.append((pending[-1][0] if pending else b"", _append_block(out, _block(pending, RESTART_INTERVAL))))
    metaindex = _append_block(out, _block([], RESTART_INTERVAL))
    index_handle = _append_block(out, _block(index, 1))
    footer = bytearray(metaindex + index_handle)
    footer += bytes(40 - len(footer))
    footer += struct.pack("<Q", MAGIC)
    out += footer
    return bytes(out)


def _block(entries: list[tuple[bytes, bytes]], restart_interval: int) -> bytes:
    out = bytearray()
    restarts = []
    previous = b""
    for number, (key, value) in enumerate(entries):
        shared = 0
        if number % restart_interval == 0:
            restarts.append(len(out))
        else:
            limit = min(len(previous), len(key))
            while shared < limit and previous[shared] == key[shared]:
                shared += 1
        out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        previous = key
    for restart in restarts or [0]:
        out += struct.pack("<I", restart)
    out += struct.pack("<I", len(restarts or [0]))
    return bytes(out)


def _append_block(out: bytearray, block: bytes) -> bytes:
    """Appends ``block`` and its trailer to ``out``; returns the block's encoded handle."""
    offset = len(out)
    out += block + bytes([NO_COMPRESSION])
    out += struct.pack("<I", tf_record.masked_crc(block + bytes([NO_COMPRESSION])))
    return varint(offset) + varint(len(block))
