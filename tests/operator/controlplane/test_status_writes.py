"""How often the operator writes a job's status, on a real API server.

What a user must see at once (the pods created, the job Running, a failure) is written at
once; the counts of active and running pods, which change as each pod starts, at most every
``running_operator.PHASE_COUNTS_WRITE_SECONDS``: a PATCH for each pod, and the watch event it
makes, was most of a job's status writes at 1,000 jobs (bench/README.md). The tests play the
kubelet and watch the job's status as the API server stores it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import watch

from operator_cluster import Namespace, Operator, job_manifest, wait_for
from tensorgrid_operator.cluster import running_operator

pytestmark = pytest.mark.controlplane


def unscheduled(manifest: dict[str, Any]) -> dict[str, Any]:
    """The job with pods no scheduler takes: they stay Pending without a verdict until the test
    plays their kubelet (the default scheduler would find no node and mark them Unschedulable,
    a condition, whose changes are written at once)."""
    for replica in manifest["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["schedulerName"] = "tensorgrid-test-no-scheduler"
    return manifest


class StatusWatch:
    """Every different status of one job the API server stores, in order, from a watch."""

    def __init__(self, namespace: Namespace, name: str) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.error: Exception | None = None
        self._stopped = threading.Event()
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._follow, args=(namespace, name), daemon=True)
        self._thread.start()

    def _follow(self, namespace: Namespace, name: str) -> None:
        try:
            for event in self._watch.stream(namespace.cp.custom.list_namespaced_custom_object, "tensorgrid.io",
                                            "v1", namespace.name, "trainingjobs",
                                            field_selector=f"metadata.name={name}", timeout_seconds=120):
                status = event["object"].get("status") or {}
                if status and (not self.statuses or status != self.statuses[-1]):
                    self.statuses.append(status)
        except Exception as e:  # noqa: BLE001 - a watch ended early loses statuses: the test says so
            if not self._stopped.is_set():
                self.error = e

    def stop(self) -> list[dict[str, Any]]:
        """The statuses seen; AssertionError if the watch ended before."""
        self._stopped.set()
        self._watch.stop()
        assert self.error is None, f"the watch of the job ended early: {self.error!r}"
        return self.statuses


def test_pods_that_start_one_by_one_make_no_status_write_each(operator: Operator, namespace: Namespace) -> None:
    seen = StatusWatch(namespace, "steps")
    try:
        namespace.apply(unscheduled(job_manifest("steps", ps=1, workers=4)))
        pods = namespace.wait_pods("steps", {"steps-ps-0", *(f"steps-worker-{i}" for i in range(4))})
        wait_for(lambda: namespace.status("steps").get("state") == "Created", 30, "the job Created")
        for name in sorted(pods):  # every 0.5 s, within one interval: each is seen by a pass of its own
            namespace.set_phase(name, "Running")
            time.sleep(0.5)
        status = namespace.wait_state("steps", "Running")
        assert (status["workers"], status["ps"]) == ("4/4", "1/1")
        time.sleep(1)  # the watch's last events
    finally:
        statuses = seen.stop()
    states = [s.get("state") for s in statuses]
    assert states[0] == "Created" and states[-1] == "Running", states
    # Created, then at most one write of the counts in between (its interval passed), then Running;
    # written for each pod there would be 4 more.
    assert len(statuses) <= 3, [(s.get("state"), s.get("workers"), s.get("ps")) for s in statuses]


def test_counts_held_back_are_written_without_another_event(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(unscheduled(job_manifest("held", ps=1, workers=2)))
    namespace.wait_pods("held", {"held-ps-0", "held-worker-0", "held-worker-1"})
    wait_for(lambda: namespace.status("held").get("state") == "Created", 30, "the job Created")
    namespace.set_phase("held-ps-0", "Running")
    namespace.set_phase("held-worker-0", "Running")
    # Nothing else happens to the job: the pass that held the counts back writes them when due.
    wait_for(lambda: (namespace.status("held").get("ps"), namespace.status("held").get("workers")) == ("1/1", "1/2"),
             running_operator.PHASE_COUNTS_WRITE_SECONDS + 10, "the running counts in the status",
             lambda: namespace.status("held"))
    assert namespace.status("held")["state"] == "Created"
