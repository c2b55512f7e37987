"""Disruptions a training job meets on a real cluster: a worker pod deleted (with the job's
progress in its status), the PS deleted (resumes from the checkpoint on its
PersistentVolumeClaim), the PS evicted through the Eviction API (what `kubectl drain` does:
refused while the job's PodDisruptionBudget stands); and the ways a user learns what is wrong: a
manifest the API server rejects, an image that does not exist."""

from __future__ import annotations

import re
from typing import Any

import kubernetes

from cluster_support import PROGRESS, Namespace, example, global_steps, wait_for

JOB_TIMEOUT = 900


# Each worker's step lasts at least this long, so a job's length in seconds has a floor whatever
# the machine's speed: unpaced, the same job took 65 s on a quiet CI machine (450 steps/s) and
# 25 minutes on a busy one (60 steps/s), and no step count suited both.
PACE_MS = 20
"""At most 50 steps/s per worker: 100 global steps/s with 2 workers."""


def _train_long(ns: Namespace, steps: int) -> None:
    """The async example, paced to last at least ``steps`` / 100 seconds, checkpointing often."""
    ns.apply(example("async", steps=steps, checkpoint_every=1000, log_every=1000, pace_ms=PACE_MS))
    ns.wait_log("digits-async-worker-0", PROGRESS, timeout=300)


def test_a_deleted_worker_does_not_stop_the_job(ns: Namespace) -> None:
    _train_long(ns, steps=8000)  # >= 80 s: the status shows progress within 30 s
    # The operator reads the training's progress from the PS's and chief's metrics into the status.
    def read_progress() -> dict[str, Any]:
        return dict((ns.job("digits-async").get("status") or {}).get("progress") or {})

    progress = wait_for("status.progress", lambda: (p := read_progress()).get("globalStep") and p, 120)
    assert progress["targetStep"] == 8000, progress
    old_uid = ns.pod("digits-async-worker-1").metadata.uid
    ns.kubectl("delete", "pod", "digits-async-worker-1", "--wait=false")
    wait_for("a new digits-async-worker-1", lambda: any(
        p.metadata.name == "digits-async-worker-1" and p.metadata.uid != old_uid for p in ns.pods()), 120)
    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]


def test_a_deleted_ps_resumes_from_the_checkpoint(ns: Namespace) -> None:
    _train_long(ns, steps=6000)  # >= 60 s: the PS is deleted after step 2000
    wait_for("a checkpoint and more steps", lambda: max(global_steps(ns.logs("digits-async-worker-0")) or [0]) >= 2000, 300)
    ns.kubectl("delete", "pod", "digits-async-ps-0", "--wait=false")
    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]

    log = ns.logs("digits-async-worker-0")
    restored = re.search(r"Restoring the model from checkpoint \S*?-(\d+)\b", log)
    assert restored, f"the chief did not restore a checkpoint after the PS was lost:\n{log}"
    checkpoint_step = int(restored.group(1))
    assert checkpoint_step >= 1000
    after = global_steps(log[restored.end():])
    assert after and min(after) >= checkpoint_step, \
        f"global step went back below the checkpoint's {checkpoint_step} after restoring: {after[:5]}"


def test_an_evicted_ps_is_replaced_and_the_job_goes_on(ns: Namespace) -> None:
    # Longer: opening the budget and waiting for the API server to take it in took 65-75 s.
    _train_long(ns, steps=15000)  # >= 150 s
    old_uid = ns.pod("digits-async-ps-0").metadata.uid
    eviction = kubernetes.client.V1Eviction(
        metadata=kubernetes.client.V1ObjectMeta(name="digits-async-ps-0", namespace=ns.name))
    # The job's PodDisruptionBudget keeps a drain off its Ready PS ...
    try:
        ns.core.create_namespaced_pod_eviction("digits-async-ps-0", ns.name, eviction)
        raise AssertionError("the PS was evicted despite the job's PodDisruptionBudget")
    except kubernetes.client.exceptions.ApiException as e:
        assert e.status == 429, e
    # ... until an administrator lifts it: the operator leaves an existing budget as it is
    # (a deleted one it creates again), so the budget is opened, not deleted.
    ns.kubectl("patch", "poddisruptionbudget", "digits-async-ps", "--type", "merge",
               "-p", '{"spec": {"minAvailable": 0}}')

    def evicted() -> bool:  # 429 until the disruption controller has processed the new budget
        try:
            ns.core.create_namespaced_pod_eviction("digits-async-ps-0", ns.name, eviction)
        except kubernetes.client.exceptions.ApiException as e:
            if e.status == 429:
                print("eviction refused:", e.body)
                return False
            raise
        return True

    wait_for("the eviction of digits-async-ps-0 once its budget is opened", evicted, 60)
    # Not finished: by now the operator may already say Created (the PS's replacement is being made).
    state = ns.job("digits-async")["status"].get("state")
    assert state not in ("Succeeded", "Failed"), f"the job ended ({state}) before the PS was evicted"
    wait_for("a new digits-async-ps-0", lambda: any(
        p.metadata.name == "digits-async-ps-0" and p.metadata.uid != old_uid for p in ns.pods()), 120)
    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
    assert job["status"].get("restarts", 0) == 0, "an eviction is not a failure of the program"


def test_an_invalid_manifest_is_rejected_naming_the_field(ns: Namespace) -> None:
    manifest = example("async").replace("restartPolicy: ExitCode", "restartPolicy: Sometimes", 1)
    result = ns.kubectl("apply", "-f", "-", stdin=manifest, check=False)
    assert result.returncode != 0
    assert "spec.replicaSpecs.PS.restartPolicy" in result.stderr, result.stderr
    assert "Sometimes" in result.stderr and "ExitCode" in result.stderr, result.stderr


def test_a_missing_image_says_why_in_describe_and_status(ns: Namespace) -> None:
    ns.apply(example("async").replace("image: tensorgrid:0.1.0", "image: tensorgrid:no-such-tag"))

    pull_failures = ("ErrImagePull", "ImagePullBackOff")

    def stuck() -> str:
        state = ns.state("digits-async")
        return state if state in pull_failures else ""

    wait_for("the job to report the image pull failure", stuck, 240)
    # Either reason: the kubelet turns one into the other between retries, so the state read a moment ago
    # may have moved on by the time of the describe.
    described = ns.kubectl("describe", "tj", "digits-async").stdout
    assert any(reason in described for reason in pull_failures) and "tensorgrid:no-such-tag" in described, described
