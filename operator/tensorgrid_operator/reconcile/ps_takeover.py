"""A PS's standby becomes the PS when the PS's pod is lost (``spec.replicaSpecs.PS.replication.standby``).

Why it exists: a standby holds a live replica of its PS's state (``resources.ps_standby``). When
the PS's pod is gone, making a new PS pod costs a schedule, an image start and a load of the
replica over the network; the standby already runs with the state in memory, so it takes the
PS's place instead (``tensorgrid ps-standby`` becomes ``ps:<index>`` at the PS's address). This
module decides when, pure; ``controller.plan_application`` applies the patch it plans.

A standby takes over ``ps-<i>`` when, in one pass:

- the job has run (``status.allPodsRunningTime``: before, the standby holds nothing yet and the
  PS's first pod is about to be made) and is not finished or suspended (the reconcile's flow);
- ``ps-<i>`` has no pod, or its pod is being deleted by this pass (a failed pod the restart
  policy retries; its process has ended). A pod still terminating is waited for: its process
  may still serve, and two ``ps:<i>`` must never run at once;
- its standby's pod runs (phase Running, not terminating).

Then one metadata patch of the standby pod (``ps_standby.takeover_patch``) does the rest: the
replica's labels make the headless Service ``<job>-ps-<i>`` select it (peers dialling the
PS's name reach it; its certificate names the PS too) and make the reconcile count it as
``ps-<i>`` (no new PS pod is made while it lives), the job as its controller makes its
ReplicaSet let it go and start a new standby, and the annotation ``tensorgrid.io/take-over``
tells it (the kubelet writes it into the file the standby watches). Without a running standby
the PS's pod is made again as before, and loads the replica from the standby.

Recorded in ``status.parameterServerTakeovers`` (per PS: the pod that took over, when, how many
times) and an event ``PSTakenOverByStandby``.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import ps_replication
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.resources import ps_standby

Obj = dict[str, Any]
FIELD = "parameterServerTakeovers"
REASON = "PSTakenOverByStandby"
FAILED_REASON = "FailedPSTakeover"
RT = spec_lib.ReplicaType


def _standby_index(pod: Mapping[str, Any], job_name: str) -> Optional[int]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index = str(labels.get(spec_lib.LABEL_REPLICA_INDEX, ""))
    if labels.get(ps_standby.LABEL_STANDBY_OF) != job_name or not index.isdigit():
        return None
    return int(index)


def _running_standby(standbys: Sequence[Mapping[str, Any]], job_name: str, index: int) -> Optional[Mapping[str, Any]]:
    """The standby pod of PS ``index`` that runs (the oldest by name when a rollout briefly shows two)."""
    running = [p for p in standbys if _standby_index(p, job_name) == index
               and (view := podview.view_pod(p)).phase == "Running" and not view.terminating]
    return min(running, key=lambda p: str(p["metadata"]["name"])) if running else None


def _patched(pod: Mapping[str, Any], patch: Mapping[str, Any]) -> Obj:
    """The pod as the metadata patch leaves it (labels and annotations merged, null removes; the owners
    replaced)."""
    result: Obj = copy.deepcopy(dict(pod))
    meta = result.setdefault("metadata", {})
    for field in ("labels", "annotations"):
        merged = {**(meta.get(field) or {}), **patch["metadata"].get(field, {})}
        meta[field] = {k: v for k, v in merged.items() if v is not None}
    meta["ownerReferences"] = [dict(r) for r in patch["metadata"]["ownerReferences"] if "$patch" not in r]
    return result


def standbys_needed(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a pass could take over a PS, so the controller must read the standby pods: the job
    asks for standbys, has run, and a PS index has no pod or a failed one (cheap, on the raw objects)."""
    replica_specs = (job.get("spec") or {}).get("replicaSpecs") or {}
    ps = replica_specs.get(RT.PS.value) or {}
    replication = ps.get("replication") or {}
    if not (replication.get("enabled") and replication.get("standby")):
        return False
    if not (job.get("status") or {}).get("allPodsRunningTime"):
        return False
    serving: set[str] = set()
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(spec_lib.LABEL_REPLICA_TYPE) == RT.PS.task_type \
                and (pod.get("status") or {}).get("phase") != "Failed":
            serving.add(str(labels.get(spec_lib.LABEL_REPLICA_INDEX)))
    count = ps.get("replicas", 1)
    return not isinstance(count, int) or any(str(i) not in serving for i in range(count))


def take_over_lost_ps(work: plans.Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                      views: Sequence[podview.PodView],
                      standbys: Sequence[Mapping[str, Any]]) -> dict[str, podview.PodView]:
    """Plan the takeovers of this pass (module docstring); the views of the standby pods as they
    will be (``ps-<i>``'s pods now), by replica. ``views``: every pod of the job."""
    replication = job_spec.ps_replication
    if not (replication.enabled and replication.standby) or not standbys \
            or not (work.job.get("status") or {}).get("allPodsRunningTime"):
        return {}
    job_name = work.job["metadata"]["name"]
    records = {str(r.get("replica")): dict(r) for r in (work.job.get("status") or {}).get(FIELD) or []}
    promoted: dict[str, podview.PodView] = {}
    for short, key in desired.items():
        if key.rtype is not RT.PS or short in work.finished:
            continue
        pods = [v for v in views if v.key == key]
        if any(not work.deleting(v) for v in pods):
            continue  # a pod serves, starts, or is still terminating: never two ps:<i> at once
        view = pods[0] if pods else None
        standby = _running_standby(standbys, job_name, key.index)
        if standby is None:
            continue  # the PS's pod is made again, and loads the replica from the standby
        meta = standby["metadata"]
        patch = ps_standby.takeover_patch(work.job, job_spec, key.index, work.epoch)
        lost = "has no pod" if view is None else f"lost its pod {view.name} ({view.reason or view.phase})"
        # Said by the controller once the patch applied (a refused one is a FAILED_REASON Warning).
        message = (f"{short} {lost}: its standby {meta['name']} becomes {short}, with the replica it holds (the "
                   f"Service {spec_lib.pod_name(job_name, key)} now selects it; told by its annotation "
                   f"{ps_replication.TAKE_OVER_ANNOTATION}); a new standby is started")
        work.plan.ps_takeovers.append(plans.PSTakeover(short, meta["name"], meta["uid"], patch, message))
        promoted[short] = podview.view_pod(_patched(standby, patch))
        earlier = records.get(short) or {}
        records[short] = {"replica": short, "pod": meta["name"], "podUID": meta["uid"],
                          "time": cond_lib.format_time(work.now), "count": int(earlier.get("count") or 0) + 1}
    if promoted:
        work.status_fields[FIELD] = [records[r] for r in sorted(records)]
    return promoted


def without_refused(status: Optional[Obj], old_status: Mapping[str, Any], refused: Sequence[plans.PSTakeover]) -> \
        Optional[Obj]:
    """The status to write after the API server refused (or no longer had) the standby pods of
    ``refused``: their records as before this pass (the next pass decides again)."""
    if status is None or not refused:
        return status
    before = {str(r.get("replica")): r for r in old_status.get(FIELD) or []}
    names = {t.replica for t in refused}
    records = [before[r] if r in names else rec for rec in status.get(FIELD) or []
               for r in [str(rec.get("replica"))] if r not in names or r in before]
    return {**status, FIELD: records}
