"""What the data channel's TLS costs per byte, by cipher, on one connection: where TLS's time goes.

``bench/tls_cost.py`` measures the whole training; this one isolates the data channel's
byte path, to see which change to it could help: a sender process ``sendall``s
2.68 MB messages (the base case's variables or gradients) over one TCP connection on
127.0.0.1, and a receiver process reads them into one reused buffer with the data
channel's own loop (``stream_io.recv_exact_into``). Reported, per mode, the median over
the runs of the CPU time of each side per MB moved (what a saturated machine pays;
the wall-clock rate on a shared machine says little). Modes, interleaved:

- ``plaintext``: no TLS (``TENSORGRID_INSECURE=1``'s path);
- ``TLS 1.3`` (AES-256-GCM): the data channel's contexts as they are (``tls.Credentials``);
  Python 3.11's ``ssl`` cannot reorder TLS 1.3's suites, and OpenSSL offers AES-256 first;
- ``TLS 1.2 AES-128-GCM`` and ``TLS 1.2 AES-256-GCM``: the same certificates with
  ``maximum_version`` TLS 1.2 and ECDHE with that cipher (mutual authentication, forward
  secrecy and AEAD all kept), to see what the smaller key buys;
- ``TLS 1.3, MemoryBIO reads``: the data channel's TLS 1.3, but the receiver reads the
  socket itself, 1 MiB per ``recv_into`` into one reused buffer, and hands the bytes to
  OpenSSL through an ``ssl.MemoryBIO`` (``SSLObject``) instead of letting OpenSSL read the
  socket (two ``read`` calls per 16 KiB record: its header, then its body). The design
  issue 31 suggested for the receive path, measured before making it the transport's.

    .venv/bin/python bench/tls_ciphers.py                  # 3 runs of 200 messages per mode
    .venv/bin/python bench/tls_ciphers.py --runs 5 --messages 400
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.queues
import os
import socket
import ssl
import statistics
import sys
import time
from typing import Any, Optional

from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc.transport import stream_io
from tensorgrid.distributed.rpc.transport import tls

MESSAGE_BYTES = 2_678_824
"""The base case's variables (or gradients) of one step: 669,706 float32."""
MODES = {
    "plaintext": None,
    "TLS 1.3 (AES-256-GCM)": (ssl.TLSVersion.TLSv1_3, ""),
    "TLS 1.2 AES-128-GCM": (ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"),
    "TLS 1.2 AES-256-GCM": (ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384"),
    "TLS 1.3, MemoryBIO reads": (ssl.TLSVersion.TLSv1_3, ""),
}
MEMORY_BIO_MODE = "TLS 1.3, MemoryBIO reads"
MEMORY_BIO_READ_BYTES = 1 << 20


class MemoryBioReader:
    """The server end of a TLS connection whose socket this code reads, 1 MiB at a time,
    feeding OpenSSL from memory (``ssl.MemoryBIO``)."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.buffer = memoryview(bytearray(MEMORY_BIO_READ_BYTES))
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._send_pending()
                self._read_socket()
        self._send_pending()

    def _send_pending(self) -> None:
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def _read_socket(self) -> None:
        received = self.sock.recv_into(self.buffer)
        if not received:
            raise EOFError("connection closed")
        self.incoming.write(self.buffer[:received])

    def recv_exact_into(self, view: memoryview) -> None:
        while len(view):
            try:
                view = view[self.tls.read(len(view), view):]
            except ssl.SSLWantReadError:
                self._read_socket()

    def sendall(self, data: bytes) -> None:
        self.tls.write(data)
        self._send_pending()


def _contexts(directory: str, mode: str) -> Optional[tuple[ssl.SSLContext, ssl.SSLContext]]:
    """Fresh server and client contexts of ``mode`` (None: plaintext)."""
    setting = MODES[mode]
    if setting is None:
        return None
    credentials = tls.load(directory)
    server, client = credentials.server_context, credentials.client_context
    version, ciphers = setting
    for context in (server, client):
        context.maximum_version = version
        if ciphers:
            context.set_ciphers(ciphers)
    return server, client


def _receive(directory: str, mode: str, messages: int, ready: "multiprocessing.queues.Queue[Any]") -> None:
    contexts = _contexts(directory, mode)
    listener = socket.create_server(("127.0.0.1", 0))
    ready.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    stream_io.tune(conn)
    receiver: Any = conn
    if mode == MEMORY_BIO_MODE and contexts is not None:
        receiver = MemoryBioReader(conn, contexts[0])
    elif contexts is not None:
        conn = contexts[0].wrap_socket(conn, server_side=True)
        receiver = conn
    view = memoryview(bytearray(MESSAGE_BYTES))
    started = time.process_time()
    for _ in range(messages):
        if isinstance(receiver, MemoryBioReader):
            receiver.recv_exact_into(view)
        else:
            stream_io.recv_exact_into(receiver, view)
    ready.put(time.process_time() - started)
    receiver.sendall(b"k")


def run(directory: str, mode: str, messages: int) -> dict[str, Any]:
    """One run of ``mode``: the CPU milliseconds per MB of the sender and the receiver."""
    ready: multiprocessing.queues.Queue[Any] = multiprocessing.Queue()
    receiver = multiprocessing.Process(target=_receive, args=(directory, mode, messages, ready))
    receiver.start()
    port = ready.get(timeout=60)
    contexts = _contexts(directory, mode)
    sock = socket.create_connection(("127.0.0.1", port))
    if contexts is not None:
        sock = contexts[1].wrap_socket(sock, server_hostname="localhost")
    stream_io.tune(sock)
    payload = memoryview(bytearray(MESSAGE_BYTES))
    started = time.process_time()
    for _ in range(messages):
        sock.sendall(payload)
    sender_s = time.process_time() - started
    receiver_s = ready.get(timeout=600)
    sock.recv(1)
    cipher = sock.cipher()[0] if isinstance(sock, ssl.SSLSocket) else "-"
    sock.close()
    receiver.join()
    megabytes = messages * MESSAGE_BYTES / 1e6
    return {"mode": mode, "cipher": cipher, "sender_cpu_ms_per_mb": sender_s * 1e3 / megabytes,
            "receiver_cpu_ms_per_mb": receiver_s * 1e3 / megabytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per mode, interleaved (default 3)")
    parser.add_argument("--messages", type=int, default=200, help="2.68 MB messages per run (default 200)")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with certificates.loopback_tls_for_this_process("tls_ciphers benchmark") as directory:
        directory = directory or os.environ[tls.TLS_DIR_ENV]
        for repeat in range(args.runs):
            for mode in (list(MODES) if repeat % 2 == 0 else list(reversed(MODES))):
                results[mode].append(run(directory, mode, args.messages))
                print(f"  run {repeat + 1}: {results[mode][-1]}", file=sys.stderr, flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs of {args.messages} messages of "
          f"{MESSAGE_BYTES} bytes per mode; medians")
    print("| mode | cipher | sender CPU ms/MB | receiver CPU ms/MB |")
    print("|---|---|---|---|")
    for mode, runs in results.items():
        print(f"| {mode} | {runs[0]['cipher']} | {statistics.median(r['sender_cpu_ms_per_mb'] for r in runs):.3f} | "
              f"{statistics.median(r['receiver_cpu_ms_per_mb'] for r in runs):.3f} |")


if __name__ == "__main__":
    main()
