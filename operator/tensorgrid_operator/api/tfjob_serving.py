"""Serving Kubeflow's ``kubeflow.org/v1 TFJob`` directly (``--serve-tfjob``): the pure half.

Why it exists: with the flag, a TFJob applied as it is runs under this operator. Each TFJob is
run by a TrainingJob of the same name and namespace that it owns (``training_job_for``: the
conversion of ``tfjob_conversion``, so TFJob's defaults hold), and the TrainingJob's status is
written back into the TFJob as Kubeflow's training-operator v1.9 writes it (``kubeflow_status``:
conditions Created/Running/Restarting/Succeeded/Failed with reasons ``TFJobCreated`` ...,
``replicaStatuses`` per role of the TFJob with active/succeeded/failed, ``startTime``,
``completionTime``). ``runPolicy.ttlSecondsAfterFinished`` deletes the TFJob itself
(``ttl_remaining``), and with it the TrainingJob and the pods. Whether the cluster's TFJob CRD is
this operator's to serve is ``crd_owner_problem``. Pure: no I/O.
"""

from __future__ import annotations

import datetime
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.api import tfjob_conversion

GROUP = "kubeflow.org"
VERSION = "v1"
PLURAL = "tfjobs"
CRD_NAME = f"{PLURAL}.{GROUP}"
# The annotation the chart's TFJob CRD carries: the operator serves TFJob only under a CRD that has it.
INSTALLED_BY_ANNOTATION = "tensorgrid.io/installed-by"
INSTALLED_BY = "tensorgrid-operator"
# On the TrainingJob that runs a TFJob: the TFJob's name (its watch wakes the TFJob's loop).
LABEL_TFJOB = "tensorgrid.io/tfjob-name"
# Kubeflow's condition reasons: "TFJob" + the condition type (training-operator's util.JobCreatedReason ...).
_REASON_PREFIX = "TFJob"
# Kubeflow's order of condition types in a TFJob's status.
_KUBEFLOW_TYPES = (cond_lib.CREATED, cond_lib.RUNNING, cond_lib.RESTARTING, cond_lib.SUCCEEDED, cond_lib.FAILED)

Obj = dict[str, Any]


def training_job_for(tfjob: Mapping[str, Any]) -> tuple[Obj, tuple[tfjob_conversion.FieldWarning, ...]]:
    """The TrainingJob that runs ``tfjob`` (stored, with its uid): same name and namespace, owned by the
    TFJob (deleted with it), without the TTL (the TFJob's own deletion ends both).

    Raises ``tfjob_conversion.ConversionError`` naming the field for a TFJob it cannot run.
    """
    conversion = tfjob_conversion.convert_tfjob(tfjob)
    job = conversion.training_job
    meta = tfjob["metadata"]
    job["metadata"] = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "labels": {**(meta.get("labels") or {}), LABEL_TFJOB: meta["name"]},
        "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": tfjob_conversion.TFJOB_KIND,
                             "name": meta["name"], "uid": meta["uid"], "controller": True}],
    }
    if meta.get("annotations"):
        job["metadata"]["annotations"] = dict(meta["annotations"])
    job["spec"]["runPolicy"].pop("ttlSecondsAfterFinished", None)
    return job, conversion.warnings


def _role_keys(tfjob: Mapping[str, Any]) -> dict[str, str]:
    """TrainingJob role -> the TFJob's own key for it (``Master`` stays ``Master``, ``ps`` stays ``ps``)."""
    keys: dict[str, str] = {}
    for key in (tfjob.get("spec") or {}).get("tfReplicaSpecs") or {}:
        role = tfjob_conversion.role_of(str(key))
        if role is not None:
            keys[role.value] = str(key)
    return keys


def kubeflow_status(tfjob: Mapping[str, Any], job_status: Optional[Mapping[str, Any]],
                    now: datetime.datetime) -> Obj:
    """The TFJob's status as Kubeflow writes it, from the status of the TrainingJob that runs it
    (``None``: not made yet, or refused). Conditions keep their lastTransitionTime while their status
    holds; Running turns False when the job ends, as Kubeflow's does."""
    old: Mapping[str, Any] = tfjob.get("status") or {}
    job_status = job_status or {}
    meta = tfjob["metadata"]
    who = f"TFJob {meta['namespace']}/{meta['name']}"
    conditions: list[Obj] = [dict(c) for c in old.get("conditions") or []]
    source = {c.get("type"): c for c in job_status.get("conditions") or []}
    _set(conditions, cond_lib.CREATED, True, f"{who} is created.", now)
    for ctype in (cond_lib.RUNNING, cond_lib.RESTARTING, cond_lib.SUCCEEDED, cond_lib.FAILED):
        cond = source.get(ctype)
        if cond is None:
            continue
        true = cond.get("status") == "True"
        if not true and not any(c.get("type") == ctype for c in conditions):
            continue  # Kubeflow sets a condition only once it is true
        _set(conditions, ctype, true, _message(ctype, true, who, str(cond.get("message") or "")), now)
    finished = [c for c in conditions if c["type"] in (cond_lib.SUCCEEDED, cond_lib.FAILED) and c["status"] == "True"]
    if finished:
        if any(c["type"] == cond_lib.RUNNING for c in conditions):
            _set(conditions, cond_lib.RUNNING, False, finished[0]["message"], now, reason=finished[0]["reason"])
    conditions.sort(key=lambda c: _KUBEFLOW_TYPES.index(c["type"]) if c["type"] in _KUBEFLOW_TYPES else 99)
    status: Obj = {"conditions": conditions, "replicaStatuses": _replica_statuses(tfjob, job_status)}
    for key in ("startTime", "completionTime"):
        value = job_status.get(key) or old.get(key)
        if value:
            status[key] = value
    return status


def _message(ctype: str, true: bool, who: str, detail: str) -> str:
    """Kubeflow's sentence for the condition, then the operator's own account when it has one."""
    sentence = {cond_lib.RUNNING: f"{who} is running.", cond_lib.RESTARTING: f"{who} is restarting.",
                cond_lib.SUCCEEDED: f"{who} successfully completed.", cond_lib.FAILED: f"{who} has failed."}[ctype]
    if not true:
        return detail or sentence
    return f"{sentence} {detail}" if detail else sentence


def _set(conditions: list[Obj], ctype: str, true: bool, message: str, now: datetime.datetime,
         reason: Optional[str] = None) -> None:
    """Kubeflow's condition shape: lastUpdateTime moves with any change, lastTransitionTime when the status flips."""
    value = "True" if true else "False"
    reason = reason or (_REASON_PREFIX + ctype)
    stamp = cond_lib.format_time(now)
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = stamp
            if (cond.get("status"), cond.get("reason"), cond.get("message")) != (value, reason, message):
                cond["lastUpdateTime"] = stamp
            cond.update(status=value, reason=reason, message=message)
            return
    conditions.append({"type": ctype, "status": value, "reason": reason, "message": message,
                       "lastUpdateTime": stamp, "lastTransitionTime": stamp})


def _replica_statuses(tfjob: Mapping[str, Any], job_status: Mapping[str, Any]) -> Obj:
    """Per role, under the TFJob's own key: active, succeeded, failed (Kubeflow's ReplicaStatus), and the
    label selector of the role's pods."""
    counts = job_status.get("replicaStatuses") or {}
    name = tfjob["metadata"]["name"]
    statuses: Obj = {}
    for role, key in _role_keys(tfjob).items():
        of_role = counts.get(role) or {}
        task_type = spec_lib.ReplicaType(role).task_type
        statuses[key] = {
            "active": int(of_role.get("active", 0)),
            "succeeded": int(of_role.get("succeeded", 0)),
            "failed": int(of_role.get("failed", 0)),
            "selector": f"{spec_lib.LABEL_JOB_NAME}={name},{spec_lib.LABEL_REPLICA_TYPE}={task_type}",
        }
    return statuses


def finished(status: Mapping[str, Any]) -> bool:
    """Whether a TFJob's status says it ended."""
    return cond_lib.job_finished(status.get("conditions") or [])


def ttl_remaining(tfjob: Mapping[str, Any], now: datetime.datetime) -> Optional[float]:
    """Seconds until a finished TFJob is deleted (``runPolicy.ttlSecondsAfterFinished`` after its
    completionTime; 0 or less: now); ``None`` while it runs or when it has no TTL."""
    ttl = ((tfjob.get("spec") or {}).get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    status = tfjob.get("status") or {}
    completed = cond_lib.parse_time(status.get("completionTime"))
    if ttl is None or not finished(status) or completed is None:
        return None
    return (completed + datetime.timedelta(seconds=int(ttl)) - now).total_seconds()


def crd_owner_problem(crd: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why this operator must not serve TFJob under ``crd`` (the cluster's tfjobs.kubeflow.org), or ``None``
    when the chart installed it (its annotation ``tensorgrid.io/installed-by: tensorgrid-operator``)."""
    if crd is None:
        return (f"the CustomResourceDefinition {CRD_NAME} does not exist: install the chart with "
                f"kubeflowTFJob.enabled=true, which ships it")
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    if annotations.get(INSTALLED_BY_ANNOTATION) != INSTALLED_BY:
        managed = ((crd.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/managed-by", "")
        return (f"the CustomResourceDefinition {CRD_NAME} was not installed by tensorgrid's chart (no annotation "
                f"{INSTALLED_BY_ANNOTATION}: {INSTALLED_BY}" + (f"; managed by {managed!r}" if managed else "")
                + "): another controller (Kubeflow's training-operator) owns TFJob; uninstall it and its CRD "
                  "first, or run without --serve-tfjob")
    return None
