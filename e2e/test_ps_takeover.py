"""A PS with a live replica and a standby on a real cluster (docs/operator.md, "Live replicas of
the PS state"): the PS pod is deleted in the middle of training, its standby takes over as
`ps-0` (the operator relabels it, the Service follows, the standby reads the take-over file
the kubelet writes), and training goes on from the state the PS had a moment before, not from
the last checkpoint."""

from __future__ import annotations

from typing import Any

import yaml

from cluster_support import PROGRESS, Namespace, example, global_steps, wait_for

JOB_TIMEOUT = 900
PACE_MS = 20  # at most 50 steps/s per worker (test_faults.py): the job lasts long enough to act in
STANDBY_OF = "tensorgrid.io/ps-standby-of"


def _async_with_a_standby(steps: int) -> str:
    documents = [d for d in yaml.safe_load_all(example("async", steps=steps, checkpoint_every=1000,
                                                       log_every=100, pace_ms=PACE_MS)) if d]
    for doc in documents:
        if doc["kind"] == "TrainingJob":
            doc["spec"]["replicaSpecs"]["PS"]["replication"] = {"enabled": True, "standby": True,
                                                                 "maxLagSeconds": 1}
    return yaml.safe_dump_all(documents)


def _reasons(ns: Namespace) -> str:
    return ns.kubectl("get", "events", "-o", "jsonpath={.items[*].reason}", check=False).stdout


def test_a_deleted_ps_is_taken_over_by_its_standby_without_rolling_back(ns: Namespace) -> None:
    ns.apply(_async_with_a_standby(steps=6000))  # >= 60 s at 100 global steps/s
    ns.wait_log("digits-async-worker-0", PROGRESS, timeout=300)
    wait_for("the PS's standby to run", lambda: [p for p in ns.pods(f"{STANDBY_OF}=digits-async")
                                                 if p.status.phase == "Running"], 300)
    wait_for("1500 steps", lambda: max(global_steps(ns.logs("digits-async-worker-0")) or [0]) >= 1500, 300)
    reached = max(global_steps(ns.logs("digits-async-worker-0")))
    ns.kubectl("delete", "pod", "digits-async-ps-0", "--wait=false")
    wait_for("the event PSTakenOverByStandby", lambda: "PSTakenOverByStandby" in _reasons(ns), 180)

    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
    log = ns.logs("digits-async-worker-0")
    assert "Restoring the model from checkpoint" not in log, log[-3000:]
    steps = global_steps(log)
    after = steps[steps.index(reached) + 1:] if reached in steps else []
    # One second of lag at most: about 100 global steps; a checkpoint would be up to 1,000 back.
    assert after and min(after) >= reached - 300, (reached, after[:10])
    starts: list[dict[str, Any]] = job["status"].get("parameterServerStarts") or []
    assert any(s.get("source") == "LiveReplica" for s in starts), starts
    conditions = {c["type"]: c for c in job["status"].get("conditions") or []}
    assert conditions.get("PSStateRecovered", {}).get("status") == "True", conditions
