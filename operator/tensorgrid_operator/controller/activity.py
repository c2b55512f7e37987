"""Whether this operator replica is the one doing the work, as ``tensorgrid_operator_active``.

With kopf peering, the replicas sharing a peering object elect one: each writes a keep-alive
(priority, lifetime, last-seen time) into the object's status, and kopf pauses a replica
that sees another live one of higher or equal priority. kopf keeps that decision to itself,
so this reads the same keep-alives every few seconds and applies kopf's rule, for the gauge
an alert reads when no replica is active (docs/metrics.md). Standalone, the replica is active.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any, Iterable, Mapping, Optional

from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator import metrics

# How often the peering objects are read: a replica taking over shows within this (kopf's
# keep-alives last 60 s, so a dead active replica is replaced within a minute anyway).
PROBE_INTERVAL_SECONDS = 15.0
# kopf's keep-alive lifetime when a peer's entry names none.
DEFAULT_PEER_LIFETIME_SECONDS = 60

log = logging.getLogger("tensorgrid_operator")


def active_among_peers(peering_statuses: Iterable[Optional[Mapping[str, Any]]], identity: str, priority: int,
                       now: datetime.datetime) -> bool:
    """Whether kopf lets the replica ``identity`` with ``priority`` act, given the status of each of
    its peering objects (``None``: the object does not exist, and kopf waits for it doing nothing).

    Paused while any peering object shows another live peer (last seen within its lifetime) whose
    priority is higher or equal; equal priorities pause both replicas, as kopf does.
    """
    for status in peering_statuses:
        if status is None:
            return False
        for peer_identity, peer in status.items():
            if peer_identity == identity or not isinstance(peer, Mapping):
                continue
            lifetime = datetime.timedelta(seconds=int(peer.get("lifetime", DEFAULT_PEER_LIFETIME_SECONDS)))
            last_seen = peer.get("lastseen")
            alive = last_seen is None or datetime.datetime.fromisoformat(str(last_seen)) + lifetime > now
            if alive and int(peer.get("priority", 0)) >= priority:
                return False
    return True


async def watch_activity(operator: running_operator.RunningOperator, identity: Optional[str],
                         priority: Optional[int], interval: Optional[float] = None) -> None:
    """Keep ``tensorgrid_operator_active`` up to date until cancelled, reading the peering objects
    every ``interval`` seconds (default ``PROBE_INTERVAL_SECONDS``)."""
    settings = operator.settings
    if settings.peering is None:
        metrics.ACTIVE.set(1)
        return
    if identity is None or priority is None:
        log.warning("tensorgrid_operator_active stays 0: this operator was started without the peering identity "
                    "and priority that tensorgrid-operator gives kopf (run it as tensorgrid-operator)")
        return
    configuration = kube.load_config(settings.kubeconfig)
    while True:
        try:
            objects = await operator.call(kube.peering_objects, configuration, settings.peering, settings.namespaces)
        except Exception as e:  # noqa: BLE001 - an API error leaves the last answer; counted in api_errors
            log.warning("could not read the peering objects for tensorgrid_operator_active: %s", e)
        else:
            statuses = [None if obj is None else dict(obj.get("status") or {}) for obj in objects.values()]
            now = datetime.datetime.now(datetime.timezone.utc)
            metrics.ACTIVE.set(1 if active_among_peers(statuses, identity, priority, now) else 0)
        await asyncio.sleep(PROBE_INTERVAL_SECONDS if interval is None else interval)
