"""Transport benchmark: a float32 tensor from one process to another, tensorgrid vs a socket.

Measures, in one run and between the same two processes (a sender holding the
tensors, a receiver timing them), for 1 MiB, 64 MiB and 1 GiB:

- socket: the physical limit for Python, a plain TCP socket (``sendall`` of the
  array's buffer, ``recv_into`` a preallocated buffer);
- tensorgrid: ``Worker.RecvTensor`` through ``tensorgrid.distributed.rpc.transport`` as the
  runtime uses it between tasks (a unary call whose bundle holds the header, the
  payload on the data channel for tensors >= 256 KiB), decoded into a usable
  numpy array;
- tensorgrid call: a call on the sender's data channel whose reply carries the
  tensor, the path a training step's tensors take (RunGraph's fetches, pushes);
- the other designs tried on the way: the same over the streaming method; the
  payload inline in the unary bundle; chunk frames on a gRPC stream with 1, 4 and
  16 MiB chunks, with grpc's TCP read chunk enlarged, and split over two
  concurrent streams; and the data channel without the receive-buffer pool.

Every design is timed round-robin (one transfer of each per round) so background
load hits them alike; reported are the median and best throughput and the median
ratio to the socket. The whole set runs twice: with glibc's default malloc, and
with MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ raised in both processes. Also
reported: round-trip latency (p50/p99) of a tiny socket exchange, a unary gRPC
call, a RecvTensor of a one-element tensor and a RunGraph-shaped call with one
small feed and fetch (the wire cost of an empty step's hop), unary and streaming,
and a data channel call with one float32 each way.

    .venv/bin/python bench/transport.py            # tables (JSON also saved to bench/results/transport.json)
    .venv/bin/python bench/transport.py --json     # JSON on stdout

Target (issue #6): tensorgrid / socket >= 0.7 at 64 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from concurrent import futures
from typing import Any, Callable, Optional

import grpc
import numpy as np

from tensorgrid.distributed.rpc import transport
from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.v1 import worker_pb2

MiB = 1 << 20
SOCKET = "socket (sendall / recv_into)"
TENSORGRID = "tensorgrid: unary + data channel"
CALL = "tensorgrid: call on the data channel (RunGraph, push)"
CALL_FETCH = 1
SIZES = {"1 MiB": MiB, "64 MiB": 64 * MiB, "1 GiB": 1024 * MiB}


def rounds(size: int) -> int:
    """Timed rounds per size: 640 MiB per design, between 4 and 40 rounds."""
    return max(4, min(40, 640 * MiB // size))

WARMUP_ROUNDS = 2
WORKER = worker_pb2.DESCRIPTOR.services_by_name["Worker"]
REQUEST = struct.Struct("<QQ")  # socket baseline: offset, length
UNLIMITED_GRPC_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
"""The benchmark measures gRPC with one large bundle too (what the runtime avoids), so no size limit."""
TUNED_GRPC_OPTIONS = UNLIMITED_GRPC_OPTIONS + [
    ("grpc.experimental.tcp_read_chunk_size", 4 * MiB),
    ("grpc.experimental.tcp_min_read_chunk_size", MiB),
    ("grpc.experimental.tcp_max_read_chunk_size", 8 * MiB),
]
CHUNK_SIZES = (MiB, 4 * MiB, 16 * MiB)
ENVIRONMENTS = {
    "default malloc": {},
    "MALLOC_MMAP_THRESHOLD_=32MiB, MALLOC_TRIM_THRESHOLD_=1GiB": {
        "MALLOC_MMAP_THRESHOLD_": str(32 * MiB), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
}


# ----------------------------------------------------------------------------- sender process

class _Sender:
    """Serves RecvTensor keys "<bytes>:<chunk bytes>:<part>/<parts>": a part of the float32 tensor of that size."""

    def __init__(self, sizes: list[int]) -> None:
        self.tensors = {}
        for size in sizes:
            array = np.empty(size // 4, np.float32)
            array[:] = np.arange(len(array), dtype=np.float32) if size <= 64 * MiB else 1.5
            self.tensors[size] = array
        self.tensors[4] = np.ones(1, np.float32)
        self.transports = {chunk: transport.Transport(transport.TransportConfig(
            chunk_bytes=chunk, data_channel=chunk == transport.CHUNK_BYTES, data_host="127.0.0.1"))
            for chunk in CHUNK_SIZES}
        main = self.transports[transport.CHUNK_BYTES]
        assert main.data_server is not None
        main.data_server.serve_calls({CALL_FETCH: self.fetch_call}, main.pool, 1 << 31)

    def fetch_call(self, control: bytes, tensors: list[wire.ReceivedTensor], peer: str) -> tuple[int, bytes, list[Any]]:
        """A data channel call whose reply is the tensor of ``control`` bytes (as RunGraph's
        fetches and a push's tensors travel), echoing what it was sent."""
        return 0, b"", [("t", self.tensors[int(control)])] + [(t.name, t.array) for t in tensors]

    def GetStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        return worker_pb2.GetStatusResponse(data_port=self.transports[transport.CHUNK_BYTES].data_port)

    def RecvTensor(self, request: Any, context: grpc.ServicerContext) -> Any:
        size, chunk, part = request.rendezvous_key[0].split(":")
        index, parts = (int(x) for x in part.split("/"))
        array = self.tensors[int(size)]
        per = -(-len(array) // parts)
        tx = self.transports[int(chunk)]
        return tx.write_frames(None, [("t", array[index * per:(index + 1) * per])], context=context,
                               use_data_channel=request.options.allow_data_channel)

    def RunGraph(self, frames: Any, context: grpc.ServicerContext) -> Any:
        tx = self.transports[transport.CHUNK_BYTES]
        first, feeds = tx.read_message(frames, worker_pb2.RunGraphFrame)
        response = worker_pb2.RunGraphFrame(response=worker_pb2.RunGraphResponse(step_id=first.request.step_id))
        return tx.write_frames(response, feeds.items())

    def serve_socket(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=self._socket_connection, args=(conn,), daemon=True).start()

    def _socket_connection(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        views = {size: memoryview(array).cast("B") for size, array in self.tensors.items()}
        with conn:
            while True:
                request = conn.recv(REQUEST.size, socket.MSG_WAITALL)
                if len(request) < REQUEST.size:
                    return
                size, length = REQUEST.unpack(request)
                conn.sendall(views[size][:length])


def run_sender(sizes: list[int]) -> None:
    sender = _Sender(sizes)
    ports = {}
    servers = []  # a grpc.Server stops when garbage-collected
    for name, options in (("grpc", UNLIMITED_GRPC_OPTIONS), ("grpc_tuned", TUNED_GRPC_OPTIONS)):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
        server.add_generic_rpc_handlers((grpc_frames.generic_handler(WORKER, sender),))
        ports[name] = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
    listener = socket.create_server(("127.0.0.1", 0))
    ports["socket"] = listener.getsockname()[1]
    threading.Thread(target=sender.serve_socket, args=(listener,), daemon=True).start()
    ports["data"] = sender.transports[transport.CHUNK_BYTES].data_port
    print(json.dumps(ports), flush=True)
    sys.stdin.read()  # until the parent closes our stdin


# ----------------------------------------------------------------------------- receiver process

class _IntoPool(buffers.BufferPool):
    """A pool whose next allocation is a given slice of a destination array (two
    streams filling the halves of one array)."""

    def __init__(self, destination: np.ndarray) -> None:
        super().__init__(0)
        self.destination = destination

    def empty(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        assert self.destination.dtype == dtype and self.destination.shape == shape
        return self.destination


class _Receiver:
    def __init__(self, ports: dict[str, int], sizes: list[int]) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}", options=UNLIMITED_GRPC_OPTIONS)
        self.tuned_channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc_tuned']}", options=TUNED_GRPC_OPTIONS)
        self.stub = grpc_frames.Stub(self.channel, WORKER)
        self.tuned_stub = grpc_frames.Stub(self.tuned_channel, WORKER)
        self.transport = transport.Transport(transport.TransportConfig(data_channel=False))
        self.no_pool = transport.Transport(transport.TransportConfig(data_channel=False, pool_bytes=0))
        self.data_port = ports["data"]
        self.sock = socket.create_connection(("127.0.0.1", ports["socket"]))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socket_buffers = {size: np.ones(size // 4, np.float32) for size in sizes + [4]}
        self.split_buffers = {size: np.ones(size // 4, np.float32) for size in sizes}

    def designs(self) -> dict[str, Callable[[int], np.ndarray]]:
        designs: dict[str, Callable[[int], np.ndarray]] = {
            SOCKET: self.socket,
            TENSORGRID: lambda size: self.recv(size, data_channel=True),
            CALL: self.call,
            "stream + data channel": lambda size: self.recv(size, data_channel=True, stream=True),
            "unary, payload inline in the bundle": lambda size: self.recv(size),
        }
        for chunk in CHUNK_SIZES:
            designs[f"stream of {chunk // MiB} MiB chunk frames"] = \
                lambda size, chunk=chunk: self.recv(size, chunk=chunk, stream=True)
        designs["stream of 4 MiB chunks, TCP read chunk 4 MiB"] = \
            lambda size: self.recv(size, stream=True, tuned=True)
        designs["2 concurrent streams of 4 MiB chunks"] = self.two_streams
        designs["unary + data channel, no buffer pool"] = lambda size: self.recv(size, data_channel=True,
                                                                                  tx=self.no_pool)
        return designs

    def socket(self, size: int) -> np.ndarray:
        buffer = self.socket_buffers[size]
        self.sock.sendall(REQUEST.pack(size, size))
        view = memoryview(buffer).cast("B")
        while len(view):
            view = view[self.sock.recv_into(view):]
        return buffer

    def call(self, size: int, tensors: tuple[tuple[str, Any], ...] = ()) -> np.ndarray:
        code, _, received = self.transport.call("127.0.0.1", self.data_port, CALL_FETCH, str(size).encode(), tensors)
        assert code == 0
        return received[0].array

    def recv(self, size: int, data_channel: bool = False, stream: bool = False, chunk: int = transport.CHUNK_BYTES,
             tuned: bool = False, tx: Optional[transport.Transport] = None, part: str = "0/1") -> np.ndarray:
        request = worker_pb2.RecvTensorRequest(rendezvous_key=[f"{size}:{chunk}:{part}"],
                                               options={"allow_data_channel": data_channel})
        stub = self.tuned_stub if tuned else self.stub
        frames = (stub.RecvTensorStream if stream else stub.RecvTensor)(request)
        (received,) = (tx or self.transport).read_frames(frames, peer_host="127.0.0.1")
        return received.array  # type: ignore[union-attr]

    def run_graph(self, stream: bool) -> None:
        request = worker_pb2.RunGraphFrame(request=worker_pb2.RunGraphRequest(step_id=1, send=["x"]))
        writer = self.transport.write_frames(request, [("x", self.socket_buffers[4])])
        frames = self.stub.RunGraphStream(iter(writer)) if stream else self.stub.RunGraph(writer.bundle())
        self.transport.read_message(frames, worker_pb2.RunGraphFrame)

    def two_streams(self, size: int) -> np.ndarray:
        destination = self.split_buffers[size]
        halves = np.array_split(destination, 2)
        threads = []
        for i, half in enumerate(halves):
            tx = transport.Transport(transport.TransportConfig(data_channel=False))
            tx.pool = _IntoPool(half)
            threads.append(threading.Thread(target=self.recv, args=(size,),
                                            kwargs={"tx": tx, "part": f"{i}/2", "stream": True}))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return destination

    def throughput(self, size: int) -> list[dict[str, Any]]:
        designs = self.designs()
        times: dict[str, list[float]] = {name: [] for name in designs}
        for round_index in range(WARMUP_ROUNDS + rounds(size)):
            for name, design in designs.items():
                start = time.perf_counter()
                array = design(size)
                elapsed = time.perf_counter() - start
                if round_index == 0:
                    expected = np.arange(4, dtype=np.float32) if size <= 64 * MiB else np.full(4, 1.5, np.float32)
                    assert array.nbytes == size and np.array_equal(array[:4], expected), name
                del array
                if round_index >= WARMUP_ROUNDS:
                    times[name].append(elapsed)
        socket_times = times[SOCKET]
        rows = []
        for name, samples in times.items():
            rows.append({
                "size_bytes": size, "design": name,
                "median_gbps": size / statistics.median(samples) / 1e9,
                "best_gbps": size / min(samples) / 1e9,
                "ratio_vs_socket": statistics.median(socket_times) / statistics.median(samples),
            })
        return rows

    def latency(self, iterations: int = 2000) -> dict[str, dict[str, float]]:
        calls = {
            "socket round trip (4 bytes)": lambda: self.socket(4),
            "gRPC unary call (GetStatus)": lambda: self.stub.GetStatus(worker_pb2.GetStatusRequest()),
            "RecvTensor of one float32 (unary)": lambda: self.recv(4, data_channel=True),
            "RecvTensorStream of one float32": lambda: self.recv(4, data_channel=True, stream=True),
            "RunGraph, one float32 each way (unary)": lambda: self.run_graph(stream=False),
            "RunGraphStream, one float32 each way": lambda: self.run_graph(stream=True),
            "data channel call, one float32 each way": lambda: self.call(4, (("x", self.socket_buffers[4]),)),
        }
        result = {}
        for name, call in calls.items():
            for _ in range(100):
                call()
            samples = []
            for _ in range(iterations):
                start = time.perf_counter()
                call()
                samples.append(time.perf_counter() - start)
            samples.sort()
            result[name] = {"p50_ms": samples[len(samples) // 2] * 1e3,
                            "p99_ms": samples[int(len(samples) * 0.99)] * 1e3}
        return result


def run_receiver(ports: dict[str, int], sizes: list[int]) -> None:
    receiver = _Receiver(ports, sizes)
    rows = []
    for size in sizes:
        rows.extend(receiver.throughput(size))
    print(json.dumps({"throughput": rows, "latency": receiver.latency()}), flush=True)


# ----------------------------------------------------------------------------- orchestration

def measure(env: dict[str, str], sizes: list[int]) -> dict[str, Any]:
    full_env = dict(os.environ, **env)
    sizes_arg = ",".join(str(s) for s in sizes)
    sender = subprocess.Popen([sys.executable, __file__, "--role", "sender", "--sizes", sizes_arg],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=full_env, text=True)
    try:
        assert sender.stdout is not None
        ports = sender.stdout.readline()
        result = subprocess.run([sys.executable, __file__, "--role", "receiver", "--sizes", sizes_arg,
                                 "--ports", ports], env=full_env, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"the receiver process failed:\n{result.stderr}")
        return json.loads(result.stdout)  # type: ignore[no-any-return]
    finally:
        if sender.stdin is not None:
            sender.stdin.close()
        sender.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES.values()),
                        help="tensor sizes in bytes, comma-separated (default: 1 MiB, 64 MiB, 1 GiB)")
    parser.add_argument("--role", choices=["sender", "receiver"], help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.role == "sender":
        return run_sender(sizes)
    if args.role == "receiver":
        return run_receiver(json.loads(args.ports), sizes)

    runs = []
    for label, env in ENVIRONMENTS.items():
        runs.append({"environment": label, **measure(env, sizes)})
    default_rows = runs[0]["throughput"]
    headline = {
        row["size_bytes"]: row["ratio_vs_socket"] for row in default_rows if row["design"] == TENSORGRID
    }
    report = {
        "benchmark": "transport",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "grpcio": grpc.__version__,
                    "numpy": np.__version__, "platform": platform.platform()},
        "target": {"size_bytes": 64 * MiB, "min_ratio_vs_socket": 0.7},
        "tensorgrid_ratio_vs_socket": {str(k): v for k, v in headline.items()},
        "data_channel_call_ratio_vs_socket": {
            str(row["size_bytes"]): row["ratio_vs_socket"] for row in default_rows if row["design"] == CALL},
        "runs": runs,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    results = pathlib.Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / "transport.json").write_text(json.dumps(report, indent=2) + "\n")
    names = {v: k for k, v in SIZES.items()}
    for run in runs:
        print(f"\n== {run['environment']}: float32 tensor, sender process -> receiver process on 127.0.0.1")
        print(f"{'size':>8}  {'design':<54} {'median GB/s':>11} {'best GB/s':>10} {'vs socket':>9}")
        for row in run["throughput"]:
            size = names.get(row["size_bytes"], f"{row['size_bytes']} B")
            print(f"{size:>8}  {row['design']:<54} {row['median_gbps']:>11.2f} {row['best_gbps']:>10.2f} "
                  f"{row['ratio_vs_socket']:>9.2f}")
        print(f"\n{'round trip':<56} {'p50 ms':>8} {'p99 ms':>8}")
        for name, figures in run["latency"].items():
            print(f"{name:<56} {figures['p50_ms']:>8.3f} {figures['p99_ms']:>8.3f}")
    ratio = headline.get(64 * MiB)
    if ratio is not None:
        verdict = "meets" if ratio >= 0.7 else "misses"
        print(f"\ntensorgrid / socket at 64 MiB: {ratio:.2f} ({verdict} the 0.7 target)")


if __name__ == "__main__":
    main()
