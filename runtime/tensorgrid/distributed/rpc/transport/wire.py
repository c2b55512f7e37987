"""The tensor wire codec: how a tensor becomes a header and payload bytes, and how
frames and bundles carry them. No sockets, no gRPC: pure functions of bytes and arrays.

A tensor travels as a *header* (a ``TensorHeader``: dtype, shape, byte size, name)
and its *payload* (the elements in C order: the array's own bytes for numeric and
bool dtypes, length-prefixed strings for ``DT_STRING``). On gRPC the header and the
payload travel as *frames*: messages whose field 1 is a header and whose field 2 is a
``bytes chunk`` of payload (``protos/tensorgrid/v1/tensor.proto``). Because the
chunk field's tag is fixed, a chunk frame is written as ``0x12 <varint length>
<payload>`` straight from the array's buffer and read at an offset into the frame,
without protobuf in between. A *bundle* holds every frame of one direction of a
unary call as ``0x0a <varint length> <frame>`` per frame. The data channel
(``data_channel.py``) sends a bundle of headers, then the payloads raw.

Also here: the dtype and shape conversions that ``graph_codec`` shares, and
``TransportError``, the error of a malformed or failed transfer, which carries the
status (a gRPC status number, as ``errors.OpError.code``) a server answers it with.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Iterable, Iterator, NamedTuple, Optional, Union, cast

import numpy as np
from google.protobuf import descriptor as descriptor_lib
from google.protobuf import message as message_lib

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.v1 import tensor_pb2

if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("tensorgrid's wire format is little-endian; big-endian hosts are not supported")

CHUNK_TAG = 0x12
"""Field 2 (chunk), wire type 2 (length-delimited): 2 << 3 | 2, in every frame message."""
BUNDLE_TAG = 0x0A
"""Field 1 (frame), wire type 2: 1 << 3 | 2, in every bundle message."""
_CHUNK_TAG_BYTES = bytes((CHUNK_TAG,))
_BUNDLE_TAG_BYTES = bytes((BUNDLE_TAG,))

Frames = Union[bytes, Iterable[Union[bytes, memoryview]]]
"""What a receiver decodes: a bundle (one ``bytes``, the request or response of a
unary method) or an iterable of frames (a streaming method's messages)."""


# ---------------------------------------------------------------------------- errors

class TransportError(ValueError):
    """A malformed, inconsistent or failed tensor transfer; ``code`` is the status (a
    gRPC status number) a server answers it with."""

    code = errors.InvalidArgumentError.code

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class TensorTooLargeError(TransportError):
    """A header declares more bytes than the receiver accepts (refused before allocating)."""

    code = errors.ResourceExhaustedError.code


# ---------------------------------------------------------------------------- dtypes and shapes

_WIRE_DTYPES: dict[int, dtypes.DType] = {}
for _name, _number in tensor_pb2.DataType.items():
    if _number != tensor_pb2.DT_INVALID:
        _WIRE_DTYPES[_number] = dtypes.as_dtype(_number)
        if _WIRE_DTYPES[_number].enum != _number:  # pragma: no cover - guards dtypes.py and tensor.proto drifting
            raise ImportError(f"tensor.proto's {_name}={_number} is not tensorgrid dtype enum {_number}")
_VALID_DTYPES = ", ".join(f"{number} ({dt.name})" for number, dt in sorted(_WIRE_DTYPES.items()))


def dtype_to_proto(dtype: Any) -> int:
    """The ``DataType`` number of a dtype (DType, name, or numpy dtype)."""
    return dtypes.as_dtype(dtype).enum


def dtype_from_proto(value: int, what: str = "dtype") -> dtypes.DType:
    """The DType of a ``DataType`` number; ValueError naming ``what`` if it is not one."""
    dtype = _WIRE_DTYPES.get(int(value))
    if dtype is None:
        raise ValueError(f"{what} has unknown DataType {value}; valid values are {_VALID_DTYPES}")
    return dtype


def shape_to_proto(shape: Optional[Iterable[Optional[int]]]) -> tensor_pb2.TensorShapeProto:
    """A static shape (None: unknown rank; a None dim: unknown size) as a proto."""
    if shape is None:
        return tensor_pb2.TensorShapeProto(unknown_rank=True)
    return tensor_pb2.TensorShapeProto(dim=[-1 if d is None else int(d) for d in shape])


def shape_from_proto(proto: tensor_pb2.TensorShapeProto, what: str = "shape") -> Optional[tuple[Optional[int], ...]]:
    """The static shape of a proto (None for unknown rank); ValueError naming ``what``."""
    if proto.unknown_rank:
        if proto.dim:
            raise ValueError(f"{what} has unknown_rank set but also dims {list(proto.dim)}")
        return None
    for d in proto.dim:
        if d < -1:
            raise ValueError(f"{what} has dimension {d}; valid sizes are >= 0, or -1 for unknown")
    return tuple(None if d == -1 else int(d) for d in proto.dim)


# ---------------------------------------------------------------------------- headers and payloads

def header_for(array: np.ndarray, payload_bytes: int, name: str = "") -> tensor_pb2.TensorHeader:
    """The header announcing ``array`` whose payload (``wire_payload``) has ``payload_bytes``."""
    dtype = cast("tensor_pb2.DataType", dtypes.as_dtype(array.dtype).enum)
    return tensor_pb2.TensorHeader(dtype=dtype, shape=tensor_pb2.TensorShapeProto(dim=array.shape),
                                   byte_size=payload_bytes, name=name)


def check_header(header: tensor_pb2.TensorHeader, max_bytes: int) -> tuple[np.dtype, tuple[int, ...]]:
    """Validates a received header; returns the numpy dtype and shape to allocate.

    Raises TransportError if the dtype is not a base type that travels or the shape is
    not fully known, or if ``byte_size`` does not fit them (element size x element
    count; for strings at least one byte per element), and TensorTooLargeError if its
    dimensions or the memory it takes decoded (``decoded_bytes``) exceed
    ``max_bytes``; all before anything is allocated.
    """
    what = f"tensor {header.name!r}"
    try:
        dtype = dtype_from_proto(header.dtype, f"header of {what}")
    except ValueError as e:
        raise TransportError(str(e)) from None
    if dtype.is_ref_dtype or dtype is dtypes.resource:
        raise TransportError(f"header of {what} has dtype {dtype.name}, which never travels between tasks "
                             f"(references travel as their value's dtype, resources stay on their task)")
    if header.shape.unknown_rank or any(d < 0 for d in header.shape.dim):
        shown = "unknown rank" if header.shape.unknown_rank else list(header.shape.dim)
        raise TransportError(f"header of {what} has shape {shown}; a sent tensor's shape must be fully known "
                             f"(every dimension >= 0)")
    shape = tuple(int(d) for d in header.shape.dim)
    count = math.prod(shape)
    # An empty shape's other dimensions are bounded too: numpy refuses [0, 2**62]
    # (ValueError) even though it holds no element.
    extent = math.prod(max(d, 1) for d in shape)
    if count == 0 and extent > max_bytes:
        raise TensorTooLargeError(f"header of {what} has shape {list(shape)}, whose other dimensions span "
                                  f"{extent} elements, above this receiver's limit of {max_bytes} "
                                  "(TransportConfig.max_tensor_bytes)")
    if dtype is dtypes.string:
        if header.byte_size < count:
            raise TransportError(f"header of {what} declares byte_size {header.byte_size}, but {count} strings "
                                 f"need at least {count} bytes")
    elif header.byte_size != dtype.size * count:
        raise TransportError(f"header of {what} declares byte_size {header.byte_size}, but dtype {dtype.name} "
                             f"and shape {list(shape)} need {dtype.size * count} bytes")
    memory = decoded_bytes(header.byte_size, count, dtype is dtypes.string)
    if memory > max_bytes:
        strings = (f" and {count} strings of {STRING_ELEMENT_BYTES} bytes each once decoded, {memory} bytes in all"
                   if dtype is dtypes.string else "")
        raise TensorTooLargeError(f"{what} declares {header.byte_size} bytes{strings}, above this receiver's limit of "
                                  f"{max_bytes} bytes (TransportConfig.max_tensor_bytes)")
    return np.dtype(dtype.as_numpy_dtype), shape


STRING_ELEMENT_BYTES = 48
"""Memory an element of a decoded string tensor takes besides its characters: the
object array's pointer (8) and a ``bytes`` object's header (33), rounded up to the
allocator's 16-byte blocks."""


def decoded_bytes(byte_size: int, count: int, is_string: bool) -> int:
    """Memory a received tensor takes once decoded: its payload, plus
    ``STRING_ELEMENT_BYTES`` per element of a string tensor (a header declaring 10**8
    empty strings announces 10**8 payload bytes but costs 4.8 GB decoded)."""
    return byte_size + (STRING_ELEMENT_BYTES * count if is_string else 0)


def as_wire_array(value: Any) -> np.ndarray:
    """``value`` as a C-contiguous, native-order numpy array of a tensorgrid dtype
    (copied only when it is not one already). TypeError for other dtypes."""
    if type(value) is np.ndarray and value.dtype in _NATIVE_WIRE_DTYPES and value.flags.c_contiguous:
        return value  # what kernels make: nothing to check or convert
    array = np.asarray(value)
    dtypes.as_dtype(array.dtype.newbyteorder("="))
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    # Not np.ascontiguousarray unconditionally: it turns a 0-d array into shape (1,).
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


_NATIVE_WIRE_DTYPES = frozenset(np.dtype(d.as_numpy_dtype) for d in dtypes.__dict__.values()
                                if isinstance(d, dtypes.DType) and not d.is_ref_dtype and d.as_numpy_dtype is not None
                                and np.dtype(d.as_numpy_dtype).isnative)
"""numpy dtypes of tensorgrid dtypes in native byte order: arrays of these travel as they are."""


def wire_payload(array: np.ndarray) -> memoryview:
    """The payload bytes of a C-contiguous array (from ``as_wire_array``).

    Numeric and bool arrays: a view of the array's own buffer, no copy. String
    (object) arrays: per element in C order, a varint ``length << 1 | is_text`` then
    the bytes (UTF-8 for a str), so str and bytes elements come back as they were;
    TypeError for an element that is neither (a resource handle, for one).
    """
    if array.dtype != np.object_:
        if array.size:
            return memoryview(array).cast("B")  # type: ignore[arg-type]  # a view of the buffer, as below, faster
        return array.reshape(-1).view(np.uint8).data
    parts: list[bytes] = []
    for item in array.flat:
        if isinstance(item, str):
            data, is_text = item.encode("utf-8"), 1
        elif isinstance(item, bytes):
            data, is_text = item, 0
        else:
            raise TypeError(f"a string tensor holds {item!r} of type {type(item).__name__}; only str and bytes "
                            f"elements travel between tasks")
        parts.append(_varint(len(data) << 1 | is_text))
        parts.append(data)
    return memoryview(b"".join(parts))


def decode_strings(payload: Union[bytes, memoryview, np.ndarray], shape: tuple[int, ...], name: str = "") -> np.ndarray:
    """The object array of str/bytes encoded by ``wire_payload``; TransportError if
    the payload does not hold exactly ``prod(shape)`` well-formed strings."""
    data = (payload.data if isinstance(payload, np.ndarray) else memoryview(payload)).cast("B")
    out = np.empty(math.prod(shape), dtype=object)
    pos = 0
    for i in range(out.size):
        prefix, pos = _read_varint(data, pos, f"string {i} of tensor {name!r}")
        end = pos + (prefix >> 1)
        if end > len(data):
            raise TransportError(f"string {i} of tensor {name!r} runs {end - len(data)} bytes past the payload")
        raw = bytes(data[pos:end])
        if prefix & 1:
            try:
                out[i] = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TransportError(f"string {i} of tensor {name!r} is marked text but is not UTF-8: {e}") from None
        else:
            out[i] = raw
        pos = end
    if pos != len(data):
        raise TransportError(f"tensor {name!r} has {len(data) - pos} bytes after its {out.size} strings")
    return out.reshape(shape)


class ReceivedTensor(NamedTuple):
    """A tensor decoded from a transfer: its header name and its value."""

    name: str
    array: np.ndarray


# ---------------------------------------------------------------------------- varints

def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: Union[bytes, memoryview], pos: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise TransportError(f"{what}: truncated or overlong length prefix")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


# ---------------------------------------------------------------------------- frames

def chunk_frame(payload: Union[bytes, memoryview]) -> bytes:
    """A chunk frame (field 2 of every frame message) holding ``payload``: one copy."""
    return b"".join(chunk_frame_pieces(payload))


def chunk_frame_pieces(payload: Union[bytes, memoryview]) -> list[Union[bytes, memoryview]]:
    """The pieces that, joined, make the chunk frame of ``payload`` (no copy yet)."""
    return [_CHUNK_TAG_BYTES, _varint(len(payload)), payload]


def header_frame_of(array: np.ndarray, payload_bytes: int, name: str) -> bytes:
    """``header_frame(header_for(array, payload_bytes, name))``, byte for byte, written out
    without building protobuf messages: the headers of tensors whose shape changes every
    step (a sparse step's ids and rows) miss the header cache, and protobuf's Python
    objects cost ten times this. Field numbers as tensor.proto declares them."""
    dims = b"".join([_varint(d) for d in array.shape])
    shape = b"\x0a" + _varint(len(dims)) + dims if dims else b""
    body = [b"\x08", _varint(dtypes.as_dtype(array.dtype).enum), b"\x12", _varint(len(shape)), shape]
    if payload_bytes:
        body += [b"\x18", _varint(payload_bytes)]
    if name:
        encoded = name.encode("utf-8")
        body += [b"\x22", _varint(len(encoded)), encoded]
    header = b"".join(body)
    return b"\x0a" + _varint(len(header)) + header


def header_frame(header: tensor_pb2.TensorHeader) -> bytes:
    """A header frame (field 1 of every frame message)."""
    data: bytes = tensor_pb2.TensorFrame(header=header).SerializeToString()
    return data


def parse_chunk(frame: Union[bytes, memoryview]) -> Optional[memoryview]:
    """The payload of a chunk frame as a view into ``frame`` (no copy), or None if the
    frame is of another kind. TransportError if it is a malformed chunk frame."""
    if not frame or frame[0] != CHUNK_TAG:
        return None
    length, pos = _read_varint(frame, 1, f"chunk frame of {len(frame)} bytes")
    if pos + length != len(frame):
        raise TransportError(f"malformed chunk frame: declares {length} payload bytes but holds "
                             f"{len(frame) - pos}")
    return memoryview(frame)[pos:]


def check_frame_type(frame_type: type[message_lib.Message]) -> None:
    """TypeError unless ``frame_type`` is a frame message (``RunGraphFrame``, ...)."""
    if not is_frame_message(frame_type.DESCRIPTOR):
        raise TypeError(f"{frame_type.__name__} is not a frame message: it needs oneof kind with "
                        f"TensorHeader header = 1 and bytes chunk = 2")


def is_frame_message(descriptor: descriptor_lib.Descriptor) -> bool:
    fields = descriptor.fields_by_number
    return (1 in fields and fields[1].name == "header" and 2 in fields and fields[2].name == "chunk"
            and "kind" in descriptor.oneofs_by_name)


def is_bundle(descriptor: descriptor_lib.Descriptor) -> bool:
    """A message whose only field is ``repeated <frame message> frame = 1``."""
    fields = descriptor.fields
    return (len(fields) == 1 and fields[0].number == 1 and fields[0].name == "frame"
            and fields[0].message_type is not None and is_frame_message(fields[0].message_type))


# ---------------------------------------------------------------------------- bundles

def split_bundle(bundle: Union[bytes, memoryview]) -> Iterator[memoryview]:
    """The frames of a bundle message, as views into it (no copy). TransportError if
    it is not a sequence of ``frame`` fields."""
    data = memoryview(bundle)
    pos = 0
    while pos < len(data):
        if data[pos] != BUNDLE_TAG:
            raise TransportError(f"malformed bundle of {len(data)} bytes: byte {pos} is not a frame field")
        length, start = _read_varint(data, pos + 1, f"bundle of {len(data)} bytes, frame at byte {pos}")
        pos = start + length
        if pos > len(data):
            raise TransportError(f"malformed bundle of {len(data)} bytes: a frame runs {pos - len(data)} bytes past "
                                 f"its end")
        yield data[start:pos]


def bundle_of_pieces(frames: Iterable[list[Union[bytes, memoryview]]]) -> bytes:
    """A bundle message of frames each given as the pieces that, joined, make it: the
    payloads are copied once, into the bundle."""
    parts: list[Union[bytes, memoryview]] = []
    for pieces in frames:
        parts.append(_BUNDLE_TAG_BYTES)
        parts.append(_varint(sum(len(p) for p in pieces)))
        parts.extend(pieces)
    return b"".join(parts)


def bundle_frames(frames: Iterable[Union[bytes, memoryview]]) -> bytes:
    """A bundle message of already-made frames (one more copy; ``bundle_of_pieces``
    avoids it)."""
    parts: list[Union[bytes, memoryview]] = []
    for frame in frames:
        parts.append(_BUNDLE_TAG_BYTES)
        parts.append(_varint(len(frame)))
        parts.append(frame)
    return b"".join(parts)


# ---------------------------------------------------------------------------- header bundles

class _HeaderCache:
    """Header frames by what determines them. A step sends and receives the same
    tensors (names, dtypes, shapes) every time, so their headers are encoded, parsed
    and validated once, not per step. Bounded: cleared when full."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._entries: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self._entries.get(key)

    def put(self, key: Any, value: Any) -> None:
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[key] = value


_encoded_headers = _HeaderCache()
_checked_headers = _HeaderCache()


def encode_headers(tensors: Iterable[tuple[str, Any]]) -> tuple[bytes, list[memoryview]]:
    """The header bundle of ``tensors`` and their payloads (views of the arrays' buffers)."""
    frames = []
    payloads = []
    for name, value in tensors:
        array = as_wire_array(value)
        payload = wire_payload(array)
        key = (name, array.dtype, array.shape, len(payload))
        frame = _encoded_headers.get(key)
        if frame is None:
            frame = header_frame_of(array, len(payload), name)
            _encoded_headers.put(key, frame)
        frames.append(frame)
        payloads.append(payload)
    return bundle_frames(frames), payloads


def decode_headers(headers: bytes, max_tensor_bytes: int,
                   ) -> Iterator[tuple[tensor_pb2.TensorHeader, np.dtype, tuple[int, ...]]]:
    """Each header of a header bundle, checked (``check_header``), with the numpy dtype
    and shape to allocate for it. TransportError for a frame that is not a header."""
    for frame in split_bundle(headers):
        key = (bytes(frame), max_tensor_bytes)
        checked = _checked_headers.get(key)
        if checked is None:
            try:
                message = tensor_pb2.TensorFrame.FromString(frame)
            except message_lib.DecodeError as e:
                raise TransportError(f"malformed header frame of {len(frame)} bytes: {e}") from None
            if message.WhichOneof("kind") != "header":
                raise TransportError("a header bundle holds a frame that is not a tensor header")
            checked = (message.header, *check_header(message.header, max_tensor_bytes))
            _checked_headers.put(key, checked)
        yield checked
