"""Where a ``grpc://host:port`` target leads: a server in this process, or a gRPC client.

A program that starts a ``tf.train.Server`` and opens ``tf.Session(server.target)``
talks to its own master by direct calls, with no serialization; any other target
gets a gRPC client.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from tensorgrid.framework import errors

_lock = threading.Lock()
_servers: dict[str, Any] = {}


def _address(target: str) -> str:
    address = target[len("grpc://"):] if target.startswith("grpc://") else target
    # NotFoundError, as TensorFlow's "No session factory registered" for such a target.
    if "://" in address:
        raise errors.NotFoundError(
            None, None, f"Unsupported session target {target!r}: use 'grpc://host:port' (or '' for in-process)")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise errors.NotFoundError(None, None, f"Session target {target!r} is not 'grpc://host:port'")
    return address


def _aliases(server: Any) -> list[str]:
    host = server.address.rpartition(":")[0]
    return [server.address, f"{host}:{server.port}", f"localhost:{server.port}", f"127.0.0.1:{server.port}"]


def register_server(server: Any) -> None:
    with _lock:
        for alias in _aliases(server):
            _servers[alias] = server


def unregister_server(server: Any) -> None:
    with _lock:
        for alias in _aliases(server):
            if _servers.get(alias) is server:
                del _servers[alias]


def servers_in_process() -> list[Any]:
    """The servers this process runs (each once), in the order they started."""
    with _lock:
        return list({id(server): server for server in _servers.values()}.values())


def local_server_for_target(target: str) -> Optional[Any]:
    with _lock:
        return _servers.get(_address(target))


def master_for_target(target: str) -> Any:
    """The master behind ``target``: the in-process object, or a gRPC client of it."""
    address = _address(target)
    server = local_server_for_target(target)
    if server is not None:
        return server.master
    from tensorgrid.distributed.rpc import clients

    return clients.MasterClient(address)
