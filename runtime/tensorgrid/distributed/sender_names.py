"""Which tasks a client may push tensors for: the names of its certificate against the sender its keys name.

Why it exists: a rendezvous key names its sending task in its own text
(``partition.rendezvous_key``), and a task's rendezvous takes the key as written. Where
each task shows a certificate naming only its own address (the operator's per-replica
certificates, docs/security.md), a server can hold a client to it: a PushTensors whose key
names a sending task that the client's certificate does not name is refused with
PERMISSION_DENIED naming both, so one member of a job cannot write another's tensors.

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
        shared = collections.Counter(hosts.values())
        self._hosts = {task: host for task, host in hosts.items() if shared[host] == 1}

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
