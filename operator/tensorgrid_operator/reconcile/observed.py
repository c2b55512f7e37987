"""Whether kopf's indexes of a job's pods and Services already show the operator's own last writes.

A reconcile reads the job's pods and Services from kopf's indexes (kept by the watches
the operator holds anyway) instead of a LIST per reconcile, which with many jobs would
make each pass cost as much as all the pods of the namespace. An index lags the API
server by the watch's delay, so right after the operator created or deleted something
it may not show it yet, and a reconcile reading it would try to create a pod again or
count a deleted one. So the operator remembers what its last plans wrote
(:class:`Expectations`); until the indexes show all of it, the reconcile reads with a
consistent LIST instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional


@dataclasses.dataclass(frozen=True)
class Expectations:
    """What the indexes must show before a reconcile may trust them."""

    pods: frozenset[str] = frozenset()
    """Names of pods created."""
    services: frozenset[str] = frozenset()
    """Names of Services created."""
    deleted_pods: frozenset[str] = frozenset()
    """Uids of pods deleted: each must be gone, or terminating."""
    deleted_services: frozenset[str] = frozenset()
    """Names of Services deleted."""

    def __bool__(self) -> bool:
        return bool(self.pods or self.services or self.deleted_pods or self.deleted_services)

    def merged(self, other: Optional[Expectations]) -> Expectations:
        if other is None:
            return self
        return Expectations(self.pods | other.pods, self.services | other.services,
                            self.deleted_pods | other.deleted_pods, self.deleted_services | other.deleted_services)


def caught_up(expected: Optional[Expectations], pods: Iterable[Mapping[str, Any]],
              services: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``pods`` and ``services`` (read from the indexes) show everything ``expected``."""
    if not expected:
        return True
    pod_names: set[str] = set()
    live_uids: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        pod_names.add(str(meta.get("name")))
        if not meta.get("deletionTimestamp"):
            live_uids.add(str(meta.get("uid")))
    service_names = {str((s.get("metadata") or {}).get("name")) for s in services}
    return (expected.pods <= pod_names and expected.services <= service_names
            and not expected.deleted_pods & live_uids and not expected.deleted_services & service_names)
