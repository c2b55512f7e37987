"""A task address that moves to another process while the old one keeps its connections,
as a Kubernetes pod's name moves to its replacement's IP when its node is lost.

A pod of a frozen node (``docker pause``, a node cut off) keeps its TCP connections: its
node's kernel still acknowledges what peers send, while nothing reads it. The operator
starts the pod again on another node under the same name, so new connections reach the
replacement and old ones still lead to the frozen process. On loopback a frozen process
keeps its ports, so its replacement cannot listen there: the relay listens on the task's
ports of ``127.0.0.1`` and forwards each new connection to the same port of ``backend``
(the task listens there, ``TENSORGRID_BIND_ADDRESS``); setting ``backend`` moves the address
for new connections only, as the pod network does.
"""

from __future__ import annotations

import socket
import threading


class AddressRelay:
    """Forwards ``127.0.0.1:<port>`` to ``<backend>:<port>`` for each of ``ports``; a
    context manager that closes every connection it made."""

    def __init__(self, ports: list[int], backend: str) -> None:
        self.backend = backend
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        for port in ports:
            listener = socket.create_server(("127.0.0.1", port), backlog=128)
            self._keep(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self, listener: socket.socket, port: int) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            self._keep(client)
            try:
                server = socket.create_connection((self.backend, port), timeout=5)
            except OSError:
                client.close()  # nothing listens there: the dialer sees the connection end
                continue
            server.settimeout(None)
            self._keep(server)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def __enter__(self) -> "AddressRelay":
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()
