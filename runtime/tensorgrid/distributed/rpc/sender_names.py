"""What a member of a job may ask of a task: the names of its certificate against the task a call speaks for.

Why it exists: mutual TLS keeps everyone outside a job out, but every member's certificate
is signed by the same CA. Where each task shows a certificate naming only its own address
(the operator's per-replica certificates, docs/security.md), a server can hold a client to
the task it is, with PERMISSION_DENIED naming both:

- PushTensors: a rendezvous key names its sending task in its own text
  (``partition.rendezvous_key``), and a task's rendezvous takes the key as written. A key
  naming a sending task that the client's certificate does not name is refused, so one
  member cannot write another's tensors (``check``);
- Shutdown reporting a finished training task (``finished_task``): only that task may say
  it finished, since a parameter server stops once every training task has, or a grace
  period after the chief (``check_task``);
- Shutdown asking a task to stop now: only the chief, the task that ends the training;
- CleanupAll (clearing a task's variables, ``Session.reset``): only a task that runs
  sessions, not a parameter server (``check_jobs``).

RunStep, RunGraph, RecvTensor and the calls that set a step up stay open to every member:
in between-graph replication each worker's session runs graphs on every parameter server.

Only where the names tell tasks apart:

- a task whose host in the cluster spec is another task's too (``localhost`` for every task
  of ``tensorgrid local`` and the tests, whose certificates all name loopback) is not checked;
- a client without a certificate (the data channel's Unix socket, whose peer the kernel
  vouches for; ``TENSORGRID_INSECURE=1``) is not checked, nor a key naming no task of the
  cluster (no step of this job takes it);
- a certificate naming every task (an earlier operator's job-wide one, or one per job made
  by hand) passes for every task, as before. Names match as a TLS client matches them:
  case-insensitive, a ``*.`` wildcard for one leftmost label, IP addresses as addresses.
"""

from __future__ import annotations

import collections
import ipaddress
import re
from typing import Iterable, Optional

from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.framework import errors

_SENDER = re.compile(r"/job:([^/;]+)/(?:replica:\d+/)?task:(\d+)")


class SenderNames:
    """The host of each task of a cluster that no other task shares: the name its certificate must carry."""

    def __init__(self, cluster: cluster_lib.ClusterSpec) -> None:
        hosts = {(job, index): _host(address) for job, index, address in cluster.all_tasks()}
        self._tasks = list(hosts)
        shared = collections.Counter(hosts.values())
        self._hosts = {task: host for task, host in hosts.items() if shared[host] == 1}

    def check_task(self, method: str, task: tuple[str, int], names: Optional[frozenset[str]], why: str) -> None:
        """PermissionDeniedError if ``names`` (``None`` without TLS) do not carry the host of
        ``task``, where no other task shares it; ``why`` ends the message (who may call)."""
        if names is None:
            return
        host = self._hosts.get(task)
        if host is None or _names_host(names, host):
            return
        raise errors.PermissionDeniedError(
            None, None, f"{method}: the client's certificate names {', '.join(sorted(names)) or 'nothing'}, not "
            f"{cluster_lib.task_name(*task)} (at {host}): {why}")

    def check_jobs(self, method: str, jobs: Iterable[str], names: Optional[frozenset[str]], why: str) -> None:
        """PermissionDeniedError unless ``names`` carry the host of a task of ``jobs`` (or a
        task of theirs shares its host with another, and names cannot tell them apart)."""
        if names is None:
            return
        tasks = [task for task in self._tasks if task[0] in set(jobs)]
        if any(task not in self._hosts or _names_host(names, self._hosts[task]) for task in tasks):
            return
        raise errors.PermissionDeniedError(
            None, None, f"{method}: the client's certificate names {', '.join(sorted(names)) or 'nothing'}, no task "
            f"of {', '.join(sorted(set(jobs)))}: {why}")

    def check(self, method: str, keys: Iterable[str], names: Optional[frozenset[str]]) -> None:
        """PermissionDeniedError if a key of ``keys`` names a sending task whose host ``names`` (the
        client's certificate's DNS names and IP addresses; ``None`` without TLS) does not carry."""
        if names is None or not self._hosts:
            return
        for key in keys:
            sender = _SENDER.match(key)
            if sender is None:
                continue
            job, index = sender.group(1), int(sender.group(2))
            host = self._hosts.get((job, index))
            if host is None or _names_host(names, host):
                continue
            raise errors.PermissionDeniedError(
                None, None, f"{method}: tensor {key!r} names {cluster_lib.task_name(job, index)} (at {host}) as its "
                f"sender, but the client's certificate names {', '.join(sorted(names)) or 'nothing'}: a task may "
                f"push only its own tensors")


def _host(address: str) -> str:
    return address.rpartition(":")[0].strip("[]").lower()


def _names_host(names: frozenset[str], host: str) -> bool:
    """Whether a certificate with ``names`` is good for ``host``, as a TLS client checks it."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return any(_same_address(name, address) for name in names)
    if host in names:
        return True
    _, dot, parent = host.partition(".")
    return bool(dot) and f"*.{parent}" in names


def _same_address(name: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(name) == address
    except ValueError:
        return False
