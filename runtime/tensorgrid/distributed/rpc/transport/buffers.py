"""Host memory of the transport: the pool of reusable buffers where received tensors
land and where device tensors are staged before sending, and the assembler that
rebuilds a tensor from a header and chunks. No sockets, no gRPC.

Received tensors land in arrays from a ``BufferPool``: one allocation per tensor,
reused across steps once nothing references it, because first-touching freshly
mapped memory (page faults) costs more than the copy itself (a 1 GiB tensor arrives
at a quarter of the speed without the pool, bench/README.md). They stay on the host:
the executor copies one to a device when an op placed there consumes it.

A tensor on a device (a cupy array on a GPU) is sent from host memory: ``stage``
copies it, once, into a pooled host buffer from its backend (pinned memory on a
GPU, so the copy is one DMA), reused by later steps like a receive buffer. Nothing
above this module reads a device array as bytes; the codec (``wire``) only ever
sees host arrays.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any, Iterable, Iterator, Optional

import numpy as np

from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.v1 import tensor_pb2


def _refcounts(buffers: list[np.ndarray]) -> list[int]:
    return [sys.getrefcount(b) for b in buffers]


# What _refcounts reports for a pooled buffer nobody else references (the list and the
# call's own references), measured rather than assumed so interpreter changes cannot
# make a buffer still in use look free.
_FREE_REFCOUNT = _refcounts([np.empty(1, np.uint8)])[0]


class BufferPool:
    """Host buffers reused by size: receive buffers, and staging buffers per device.

    ``empty(dtype, shape)`` returns an array viewing a pooled byte buffer of exactly
    the needed size when one is idle, else a new one; ``stage(value)`` copies a device
    array into such a buffer from its backend's ``host_buffer`` (pinned memory). A
    buffer is idle when nothing outside the pool references it: every array handed out
    (and every view derived from it, every payload view of it) keeps a reference, so a
    buffer is never reused while any of them lives. Receive buffers smaller than
    ``min_bytes`` are not pooled (malloc serves them fast); staging buffers of any size
    are, since pinned allocations are slow. Idle buffers are dropped (receive buffers
    first, oldest first) to keep the total within ``capacity_bytes``.
    """

    def __init__(self, capacity_bytes: int, min_bytes: int = 256 << 10) -> None:
        self.capacity_bytes = capacity_bytes
        self.min_bytes = min_bytes
        self._buffers: list[np.ndarray] = []
        self._staging: dict[backend_lib.Backend, list[np.ndarray]] = {}
        self._pooled_bytes = 0
        self._lock = threading.Lock()
        self.allocations = 0
        """Number of fresh receive allocations (for tests and benchmarks)."""
        self.reuses = 0
        """Number of times an idle buffer was handed out again (receive or staging)."""
        self.staged = 0
        """Number of device tensors copied to host by ``stage``."""
        self.staging_allocations = 0
        """Number of fresh staging buffers (pinned allocations on a GPU)."""

    def empty(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        nbytes = dtype.itemsize * math.prod(shape)
        if nbytes < self.min_bytes or nbytes > self.capacity_bytes:
            self.allocations += 1
            return np.empty(shape, dtype)
        with self._lock:
            buffer = self._take(self._buffers, nbytes)
            if buffer is None:
                # In a task with a GPU, pinned: a received tensor goes on to the device, and a
                # copy from pinned memory ran at 53 GB/s against 3.7 from pageable on an H200.
                device = backend_lib.gpu_backend_in_use()
                buffer = np.empty(nbytes, np.uint8) if device is None else device.host_buffer(nbytes)
                self.allocations += 1
                self._keep(self._buffers, buffer)
        return buffer.view(dtype).reshape(shape)

    def stage(self, value: Any) -> Any:
        """``value`` in host memory the codec can read: a device array copied into a
        pooled staging buffer of its backend; anything else (numpy arrays, Python
        values) as it is. Keep the result referenced until its bytes are sent."""
        device = backend_lib.device_backend_of(value)
        if device is None:
            return value
        dtype, shape = np.dtype(value.dtype), tuple(value.shape)
        nbytes = dtype.itemsize * math.prod(shape)
        if nbytes == 0:
            return np.empty(shape, dtype)
        with self._lock:
            staging = self._staging.setdefault(device, [])
            buffer = self._take(staging, nbytes)
            self.staged += 1
        if buffer is None:
            buffer = device.host_buffer(nbytes)  # outside the lock: pinning memory is slow
            with self._lock:
                self.staging_allocations += 1
                self._keep(staging, buffer)
        out = buffer.view(dtype).reshape(shape)
        device.copy_to_host(value, out)
        return out

    def staged_tensors(self, tensors: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
        """``tensors`` with each value staged (``stage``), lazily."""
        for name, value in tensors:
            yield name, self.stage(value)

    def _take(self, buffers: list[np.ndarray], nbytes: int) -> Optional[np.ndarray]:
        """An idle buffer of ``nbytes`` from ``buffers``, or None (call with the lock held)."""
        same_size = [b for b in buffers if b.nbytes == nbytes]
        for buffer, count in zip(same_size, _refcounts(same_size)):
            if count <= _FREE_REFCOUNT + 1:  # +1: the same_size list
                self.reuses += 1
                return buffer
        return None

    def _keep(self, buffers: list[np.ndarray], buffer: np.ndarray) -> None:
        """Pools a fresh buffer if room can be made for it (call with the lock held)."""
        if buffer.nbytes <= self.capacity_bytes and self._make_room(buffer.nbytes):
            buffers.append(buffer)
            self._pooled_bytes += buffer.nbytes

    def _make_room(self, nbytes: int) -> bool:
        lists: list[list[np.ndarray]] = [self._buffers, *self._staging.values()]
        while self._pooled_bytes + nbytes > self.capacity_bytes:
            idle = next(((buffers, i) for buffers in lists
                         for i, c in enumerate(_refcounts(buffers)) if c <= _FREE_REFCOUNT), None)
            if idle is None:
                return False
            buffers, i = idle
            self._pooled_bytes -= buffers.pop(i).nbytes
        return True

    @property
    def pooled_bytes(self) -> int:
        """Bytes held by the pool, idle or in use."""
        return self._pooled_bytes


def allocate(pool: BufferPool, header: tensor_pb2.TensorHeader, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Validates ``header`` and allocates for it: returns the destination array and the
    flat uint8 array its payload is written into (the same memory for numeric
    tensors; a staging buffer, decoded by ``finish_payload``, for strings)."""
    dtype, shape = wire.check_header(header, max_bytes)
    return allocate_checked(pool, header, dtype, shape)


def allocate_checked(pool: BufferPool, header: tensor_pb2.TensorHeader, dtype: np.dtype,
                     shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``allocate`` for a header already checked (``dtype`` and ``shape`` from ``check_header``)."""
    if dtype == np.object_:
        # The object array is made by ``finish_payload`` once the payload arrived: a
        # header alone must not cost 8 bytes per declared element. Until then, a
        # zero-stride view stands for its shape, allocating nothing.
        staging = pool.empty(np.dtype(np.uint8), (header.byte_size,))
        return np.broadcast_to(np.empty((), dtype), shape), staging
    array = pool.empty(dtype, shape)
    return array, array.reshape(-1).view(np.uint8)


def finish_payload(header: tensor_pb2.TensorHeader, array: np.ndarray, payload: np.ndarray) -> np.ndarray:
    """The usable value once ``payload`` (from ``allocate``) is filled."""
    if array.dtype == np.object_:
        return wire.decode_strings(payload, array.shape, header.name)
    return array


class TensorAssembler:
    """Rebuilds tensors from a header frame and the chunk frames after it.

    ``start(header)`` validates the header (``check_header``) and allocates the one
    destination array; ``add(chunk)`` copies each chunk into place; both return the
    finished ``ReceivedTensor`` once all ``byte_size`` bytes arrived. More bytes than
    declared, a new header before the current tensor is complete, or ``finish()``
    while one is incomplete raise TransportError naming the tensor.
    """

    def __init__(self, pool: BufferPool, max_tensor_bytes: int) -> None:
        self._pool = pool
        self._max_tensor_bytes = max_tensor_bytes
        self._header: Optional[tensor_pb2.TensorHeader] = None
        self._array: Optional[np.ndarray] = None
        self._payload: Optional[np.ndarray] = None
        self._filled = 0

    @property
    def busy(self) -> bool:
        """A tensor is started and still lacks bytes."""
        return self._header is not None

    @property
    def name(self) -> str:
        """Name of the tensor being assembled ("" when not busy)."""
        return self._header.name if self._header is not None else ""

    @property
    def missing(self) -> int:
        """Bytes the tensor being assembled still lacks."""
        return 0 if self._payload is None else self._payload.size - self._filled

    def start(self, header: tensor_pb2.TensorHeader) -> Optional[wire.ReceivedTensor]:
        if self._header is not None:
            raise wire.TransportError(f"header of tensor {header.name!r} arrived while tensor {self.name!r} "
                                      f"still lacks {self.missing} bytes")
        array, payload = allocate(self._pool, header, self._max_tensor_bytes)
        if payload.size == 0:
            return wire.ReceivedTensor(header.name, finish_payload(header, array, payload))
        self._header, self._array, self._payload, self._filled = header, array, payload, 0
        return None

    def add(self, chunk: memoryview) -> Optional[wire.ReceivedTensor]:
        if self._header is None or self._array is None or self._payload is None:
            raise wire.TransportError(f"chunk frame of {len(chunk)} bytes arrived without a tensor header before it")
        end = self._filled + len(chunk)
        size = self._payload.size
        if end > size:
            raise wire.TransportError(f"tensor {self._header.name!r} got {end - size} bytes more than the "
                                      f"{size} its header declared")
        self._payload[self._filled:end] = np.frombuffer(chunk, np.uint8)
        self._filled = end
        if end < size:
            return None
        header, array, payload = self._header, self._array, self._payload
        self._header = self._array = self._payload = None
        return wire.ReceivedTensor(header.name, finish_payload(header, array, payload))

    def finish(self) -> None:
        """Checks that no tensor was left incomplete (call when the stream ends)."""
        if self._header is not None and self._payload is not None:
            raise wire.TransportError(f"stream ended after {self._filled} of {self._payload.size} bytes of tensor "
                                      f"{self._header.name!r}")
