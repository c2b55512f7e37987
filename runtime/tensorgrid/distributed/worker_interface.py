"""What a master and peer workers call on a task's worker, wherever it runs.

As TensorFlow's ``worker_interface.h``: the task's own ``worker.Worker`` and the
remote ``rpc.clients.WorkerClient`` both implement ``WorkerInterface``, so a master
session and a step's pushes cannot tell a local worker from a remote one
(``rpc.server.Server._peer`` hands out either).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence

from tensorgrid.framework import graph_def as graph_def_lib


class WorkerInterface(Protocol):
    """A task's Worker service, local or remote. Errors are ``errors.OpError``s."""

    task: str
    """The worker's task, e.g. ``/job:ps/replica:0/task:0``."""

    def incarnation_quick(self) -> int:
        """The task's incarnation, which changes when it restarts; also a liveness probe."""

    def devices(self) -> list[tuple[str, str]]:
        """The task's devices as ``(name, device type)``."""

    def register_graph(self, session_handle: str, graph_def: graph_def_lib.GraphDef, feeds: Sequence[str],
                       fetches: Sequence[str], targets: Sequence[str], isolate_session_state: bool = False,
                       *, peer_addresses: Optional[Mapping[str, str]] = None, registering_task: str = "",
                       registering_incarnation: int = 0) -> str:
        """Prepares a partition of a session's graph; returns the handle ``run_graph`` takes. With
        ``isolate_session_state`` the partition's resources are the session's own on this task.
        ``peer_addresses`` (task name -> ``host:port``, the registering master's) name the tasks of
        the step, so that this task reaches one its own cluster spec lacks (a worker that joined),
        and ``registering_task`` (the master's task; its worker's incarnation) at the address it
        says it has, when it moved."""

    def deregister_graph(self, handle: str) -> None:
        """Forgets a registered partition."""

    def run_graph(self, handle: str, step_id: int, feed_values: Sequence[Any]) -> list[Any]:
        """Runs a registered partition for one step; returns its fetches in registration order."""

    def recv_tensor(self, step_id: int, key: str) -> Any:
        """The value a Send of this task produced for rendezvous ``key`` in ``step_id`` (waits for it)."""

    def push_tensors(self, step_id: int, from_task: str, items: Sequence[tuple[str, Any]]) -> None:
        """Delivers tensors that ``from_task``'s Sends produced for this task, by rendezvous key."""

    def abort_step(self, step_id: int, reason: str) -> None:
        """Fails the step on this task: its waiters and its partitions still running."""

    def cleanup_all(self, containers: Optional[list[str]] = None) -> None:
        """Clears resource containers (all when None or empty)."""
