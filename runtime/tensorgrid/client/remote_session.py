"""A session whose graph runs on a cluster, through the master at ``grpc://host:port``.

The first ``run`` sends the whole graph (CreateSession); later runs send only the
ops added since (ExtendSession). Feeds and fetches travel by tensor name. If the
target is a server in this process, calls go straight to its master object.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from tensorgrid.client import session as session_lib
from tensorgrid.distributed.rpc import session_targets
from tensorgrid.distributed import master as master_lib
from tensorgrid.framework import graph as graph_lib


class RemoteEngine:
    """Runs a Session's steps through a master."""

    def __init__(self, target: str, graph: graph_lib.Graph, config: Any) -> None:
        self._graph = graph
        self._config = config
        self._lock = threading.Lock()
        self._closed = False
        self._master = session_targets.master_for_target(target)
        self._handle: Optional[str] = None
        self._sent_up_to = 0
        self._options = master_lib.SessionOptions(
            device_filters=list(getattr(self._config, "device_filters", []) or []),
            operation_timeout_in_ms=int(getattr(self._config, "operation_timeout_in_ms", 0) or 0),
            isolate_session_state=bool(getattr(self._config, "isolate_session_state", False)),
        )

    def _sync_graph(self) -> str:
        newest = self._graph._last_id
        if self._handle is None:
            graph_def = self._graph.as_graph_def()
            self._handle = self._master.create_session(graph_def, self._options)
            self._sent_up_to = newest
        elif newest > self._sent_up_to:
            self._master.extend_session(self._handle, self._graph.as_graph_def(from_version=self._sent_up_to))
            self._sent_up_to = newest
        return self._handle

    def run(self, feeds: list[graph_lib.Tensor], feed_values: list[Any], fetches: list[graph_lib.Tensor],
             targets: list[graph_lib.Operation], options: Any) -> list[Any]:
        with self._lock:
            handle = self._sync_graph()
        timeout_ms = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        return list(self._master.run_step(
            handle,
            {t.name: v for t, v in zip(feeds, feed_values)},
            [t.name for t in fetches],
            [op.name for op in targets],
            timeout=timeout_ms / 1000.0 if timeout_ms else None,
        ))

    def list_devices(self) -> list[Any]:
        return [session_lib.LocalDevice(name, kind, 0, incarnation)
                for name, kind, incarnation in self._master.list_devices()]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._handle is not None:
            try:
                self._master.close_session(self._handle)
            except Exception:  # noqa: BLE001 - the cluster may already be gone
                pass
            self._handle = None


def reset(target: str, containers: Optional[list[str]] = None, config: Any = None) -> None:
    """Clears ``containers`` through the master at ``target``. A master that cannot be
    reached fails at once with UnavailableError (TensorFlow waits for it); one that does not
    answer, after ``config.operation_timeout_in_ms`` (60 s when unset)."""
    master = session_targets.master_for_target(target)
    if isinstance(master, master_lib.Master):
        master.reset(containers)
        return
    timeout_ms = int(getattr(config, "operation_timeout_in_ms", 0) or 0)
    master.reset(containers, timeout_s=timeout_ms / 1000 if timeout_ms > 0 else 60.0)
