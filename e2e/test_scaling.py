"""`kubectl scale` on a running asynchronous job (docs/operator.md, "Scaling a running job"): scaled
2 -> 4 -> 1 workers mid-training, the added workers train against the running parameter server,
the removed ones go without a retry, no other pod restarts, the loss falls and the job succeeds."""

from __future__ import annotations

from typing import Any

import yaml

from cluster_support import PROGRESS, Namespace, example, loss_values, wait_for

JOB = "digits-async"
JOB_TIMEOUT = 900


def _scalable_example() -> str:
    """The async example, long enough to scale twice, with bounds on its workers."""
    documents = [d for d in yaml.safe_load_all(example("async", steps=4000, log_every=100, pace_ms=20)) if d]
    for doc in documents:
        if doc["kind"] == "TrainingJob":
            doc["spec"]["replicaSpecs"]["Worker"].update(replicas=2, minReplicas=1, maxReplicas=4)
    return yaml.safe_dump_all(documents)


def _uids(ns: Namespace) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in ns.pods(f"tensorgrid.io/job-name={JOB}")
            if not p.metadata.deletion_timestamp}


def _scale(ns: Namespace, replicas: int) -> None:
    ns.kubectl("scale", f"tj/{JOB}", f"--replicas={replicas}")


def test_a_job_scaled_two_four_one_trains_on_and_succeeds(ns: Namespace) -> None:
    ns.apply(_scalable_example())
    ns.wait_log(f"{JOB}-worker-1", PROGRESS, timeout=300)
    before = _uids(ns)
    assert set(before) == {f"{JOB}-ps-0", f"{JOB}-worker-0", f"{JOB}-worker-1"}, before

    _scale(ns, 4)
    for index in (2, 3):  # the new workers train: their own progress lines
        ns.wait_log(f"{JOB}-worker-{index}", rf"worker:{index} global step\s+\d+", timeout=300)
    after_up = _uids(ns)
    assert {n: after_up.get(n) for n in before} == before, "a running pod was restarted by scaling up"
    status: dict[str, Any] = ns.job(JOB)["status"]
    assert status["desiredWorkerReplicas"] == 4 and status.get("restarts", 0) == 0, status

    _scale(ns, 1)
    wait_for("workers 1-3 gone", lambda: set(_uids(ns)) == {f"{JOB}-ps-0", f"{JOB}-worker-0"}, 180)
    assert _uids(ns) == {n: before[n] for n in (f"{JOB}-ps-0", f"{JOB}-worker-0")}
    status = ns.job(JOB)["status"]
    assert status.get("restarts", 0) == 0 and not status.get("finishedReplicas"), status

    job = ns.wait_state(JOB, ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
    assert job["status"].get("restarts", 0) == 0, job["status"]
    losses = loss_values(ns.logs(f"{JOB}-worker-0"))
    assert len(losses) >= 4 and losses[-1] < losses[0], losses
