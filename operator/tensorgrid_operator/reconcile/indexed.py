"""What kopf's indexes keep of each pod and Service: only the fields a reconcile reads.

The operator's indexes hold every pod and Service of every job it watches. Kept whole,
each entry holds the API's whole object (the pod's spec with its TF_CONFIG, every
container's image and probes, ``managedFields``), most of the operator's memory at a
thousand jobs. A reconcile reads few of those fields (:mod:`podview`, :mod:`observed`,
:mod:`progress`, :mod:`kueue`, ``podview.owned_by``), so the indexes keep a projection
with exactly those, and the decisions read a projection and a whole object alike.
A field a decision starts to read must be added here: the reconcile tables run on
projections (tests/operator/support/operator_sim.py), so a missing one shows there.
"""

from __future__ import annotations

from typing import Any, Mapping

Obj = dict[str, Any]

# Read by podview (name, uid, labels, deletionTimestamp), owned_by (ownerReferences), kueue
# (annotations) and observed (name, uid, deletionTimestamp).
POD_METADATA = ("name", "uid", "labels", "annotations", "deletionTimestamp", "ownerReferences")
# Read by podview (nodeName, schedulingGates, the containers' names to find the main one).
POD_SPEC = ("nodeName", "schedulingGates")
# Read by podview (phase, reason, message, conditions, container states) and progress (podIP).
POD_STATUS = ("phase", "reason", "message", "podIP", "conditions")
CONTAINER_STATUS = ("name", "state")
CONDITION = ("type", "status", "reason", "message")
# Read by reconcile (name, ownerReferences) and observed (name).
SERVICE_METADATA = ("name", "uid", "ownerReferences")


def _pick(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Obj:
    """The ``keys`` that ``obj`` has: an absent field stays absent, not None."""
    return {k: obj[k] for k in keys if k in obj}


def pod(body: Mapping[str, Any]) -> Obj:
    """The fields of a pod that a reconcile reads."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    slim_spec = _pick(spec, POD_SPEC)
    if "containers" in spec:
        slim_spec["containers"] = [_pick(c, ("name",)) for c in spec["containers"] or []]
    slim_status = _pick(status, POD_STATUS)
    if status.get("conditions"):
        slim_status["conditions"] = [_pick(c, CONDITION) for c in status["conditions"]]
    for field in ("containerStatuses", "initContainerStatuses"):
        if field in status:
            slim_status[field] = [_pick(cs, CONTAINER_STATUS) for cs in status[field] or []]
    return {"metadata": _pick(meta, POD_METADATA), "spec": slim_spec, "status": slim_status}


def service(body: Mapping[str, Any]) -> Obj:
    """The fields of a Service that a reconcile reads."""
    return {"metadata": _pick(body.get("metadata") or {}, SERVICE_METADATA)}
