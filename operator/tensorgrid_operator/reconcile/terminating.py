"""Pods stuck Terminating: said on the job after a while, and force-deleted when the operator is told to.

A pod whose node died, lost its network or went NotReady is never confirmed gone by
its kubelet: it stays Terminating, its replica cannot be created again under the same
name, and the job would wait forever. Once a terminating pod is more than
``after_seconds`` past the end of its grace period (``metadata.deletionTimestamp``),
the job gets the condition ``StuckTerminating=True`` and a Warning event naming the
pods and their nodes; with ``force_delete`` the operator then deletes them with a grace
period of 0, as ``kubectl delete --force`` would, and their replicas are created again.

Force deletion only removes the API object: if the node is merely cut off, the old
process may still run beside its replacement until the node returns. So it is off by
default (Kubernetes' own advice for pods on unreachable nodes). The time past the grace
period is read from the pod alone: reading Node objects would need a cluster-wide
permission the operator does without.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Optional, Sequence

from tensorgrid_operator.reconcile import podview

REASON = "PodStuckTerminating"


@dataclasses.dataclass(frozen=True)
class StuckPolicy:
    """When a terminating pod counts as stuck, and what is done about it."""

    after_seconds: float = 300.0
    """Seconds past the end of its grace period after which a terminating pod is stuck."""
    force_delete: bool = False
    """Delete stuck pods with a grace period of 0, so their replicas are created again."""


def stuck_pods(views: Sequence[podview.PodView], now: datetime.datetime,
               policy: StuckPolicy) -> tuple[list[podview.PodView], Optional[float]]:
    """The stuck pods, and the seconds until the next terminating pod becomes stuck (``None``: none will)."""
    stuck, due = [], None
    for view in views:
        if not view.terminating or view.deletion_time is None:
            continue
        wait = (view.deletion_time + datetime.timedelta(seconds=policy.after_seconds) - now).total_seconds()
        if wait <= 0:
            stuck.append(view)
        elif due is None or wait < due:
            due = wait
    return sorted(stuck, key=lambda v: v.name), due


def describe(stuck: Sequence[podview.PodView], policy: StuckPolicy) -> str:
    """One clause per pod: its node and when its grace period ended (stable while the pods stay stuck)."""
    clauses = [f"{v.name} (node {v.node or 'unknown'}, grace period ended at "
               f"{v.deletion_time.strftime('%Y-%m-%dT%H:%M:%SZ') if v.deletion_time else 'unknown'})"
               for v in stuck]
    shown = ", ".join(clauses[:5]) + (f" and {len(clauses) - 5} more" if len(clauses) > 5 else "")
    action = ("force-deleting them (--force-delete-stuck-pods)" if policy.force_delete
              else "their replicas wait; if the node is gone for good, delete them with "
                   "kubectl delete pod --force --grace-period=0, or run the operator with --force-delete-stuck-pods")
    return (f"{'pod' if len(stuck) == 1 else 'pods'} still terminating more than {policy.after_seconds:g}s after "
            f"the grace period, the node may be down or NotReady: {shown}; {action}")
