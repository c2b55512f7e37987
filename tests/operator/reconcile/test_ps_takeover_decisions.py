"""A PS's standby made the PS when the PS's pod is lost (reconcile.ps_takeover), without a cluster: when
it happens and when it must not, what the pass records, and that the standby then counts as the PS."""

from __future__ import annotations

import copy
import json
from typing import Any, Optional

from operator_sim import Sim, make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import indexed
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import ps_takeover
from tensorgrid_operator.reconcile import reconcile
from tensorgrid_operator.resources import ps_standby

STANDBY = "click-ps-0-standby-7d9f-x2"


class TakeoverSim(Sim):
    """The job's pods, its standby's pods (as its ReplicaSet makes them) and a clock."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(job)
        self.standbys: dict[str, dict[str, Any]] = {}

    def plan(self) -> plans.Plan:
        return reconcile.reconcile(self.job, [indexed.pod(p) for p in self.pods.values()],
                                   [indexed.service(s) for s in self.services.values()], self.now,
                                   self.retry_delay, self.stuck, [indexed.pod(p) for p in self.standbys.values()])

    def apply(self, plan: plans.Plan, status: bool = True, deletes: bool = True, creates: bool = True) -> None:
        for takeover in plan.ps_takeovers:  # the patch, as the API server merges it
            pod = self.standbys.pop(takeover.pod)
            assert pod["metadata"]["uid"] == takeover.uid
            meta = pod["metadata"]
            for field in ("labels", "annotations"):
                merged = {**meta.get(field, {}), **takeover.patch["metadata"][field]}
                meta[field] = {k: v for k, v in merged.items() if v is not None}
            assert takeover.patch["metadata"]["ownerReferences"][0] == {"$patch": "replace"}  # the RS's goes
            meta["ownerReferences"] = takeover.patch["metadata"]["ownerReferences"][1:]
            self.pods[takeover.pod] = pod
        super().apply(plan, status, deletes, creates)

    def add_standby(self, name: str = STANDBY, phase: str = "Running") -> dict[str, Any]:
        template = ps_standby.deployment(self.job, spec_lib.parse_spec(self.job["spec"]), 0, "tls")["spec"]["template"]
        pod = {"metadata": {**copy.deepcopy(template["metadata"]), "name": name, "uid": f"uid-{name}",
                            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid",
                                                 "controller": True}]},
               "spec": copy.deepcopy(template["spec"]), "status": {"phase": phase}}
        self.standbys[name] = pod
        return pod


def running_job(ps_restart_policy: Optional[str] = None) -> TakeoverSim:
    job = make_job("click", ps=1, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["replication"] = {"enabled": True, "standby": True}
    if ps_restart_policy is not None:
        job["spec"]["replicaSpecs"]["PS"]["restartPolicy"] = ps_restart_policy
    sim = TakeoverSim(job)
    sim.settle()
    sim.run_all()
    sim.settle()
    assert sim.status.get("allPodsRunningTime")
    return sim


def test_a_lost_ps_pod_is_taken_over_by_its_running_standby_and_none_is_made() -> None:
    sim = running_job()
    sim.add_standby()
    del sim.pods["click-ps-0"]
    plan = sim.step()
    assert [(t.replica, t.pod, t.uid) for t in plan.ps_takeovers] == [("ps-0", STANDBY, f"uid-{STANDBY}")]
    assert not plan.create_pods  # no second ps:0
    patch = plan.ps_takeovers[0].patch["metadata"]
    assert patch["labels"][ps_standby.LABEL_STANDBY_OF] is None  # out of the standby Service and its ReplicaSet
    assert patch["annotations"] == {"tensorgrid.io/take-over": "/job:ps/replica:0/task:0"}
    assert patch["ownerReferences"][1]["uid"] == sim.job["metadata"]["uid"]
    assert plan.ps_takeovers[0].message.startswith(f"ps-0 has no pod: its standby {STANDBY} becomes ps-0")
    record = sim.status[ps_takeover.FIELD]
    assert [(r["replica"], r["pod"], r["count"]) for r in record] == [("ps-0", STANDBY, 1)]
    # The standby now is ps-0's pod: later passes make no PS pod and take nothing over again.
    sim.add_standby("click-ps-0-standby-7d9f-y3")  # its ReplicaSet's new standby
    before = len(sim.plans)
    sim.settle()
    assert not any(p.create_pods or p.ps_takeovers for p in sim.plans[before:])
    assert sim.status["replicaStatuses"]["PS"]["active"] == 1
    assert sim.status["ps"] == "1/1"
    # The PS it became is lost too: the new standby takes over, the record counts both.
    del sim.pods[STANDBY]
    plan = sim.step()
    assert [t.pod for t in plan.ps_takeovers] == ["click-ps-0-standby-7d9f-y3"]
    assert sim.status[ps_takeover.FIELD][0]["count"] == 2


def test_without_a_running_standby_the_ps_pod_is_made_again() -> None:
    sim = running_job()
    sim.add_standby(phase="Pending")
    del sim.pods["click-ps-0"]
    plan = sim.step()
    assert not plan.ps_takeovers and [p.name for p in plan.create_pods] == ["click-ps-0"]
    assert ps_takeover.FIELD not in sim.status


def test_a_ps_pod_still_terminating_is_waited_for() -> None:
    sim = running_job()
    sim.add_standby()
    sim.pods["click-ps-0"]["metadata"]["deletionTimestamp"] = "2030-01-01T00:01:00Z"
    plan = sim.step()
    assert not plan.ps_takeovers and not plan.create_pods  # its process may still serve as ps:0


def test_a_failed_ps_pod_that_its_policy_restarts_is_replaced_by_the_standby_in_the_same_pass() -> None:
    sim = running_job("OnFailure")
    sim.add_standby()
    sim.set_phase("click-ps-0", "Failed", exit_code=1)
    plan = sim.step()
    assert [name for name, _ in plan.delete_pods] == ["click-ps-0"]
    assert [t.pod for t in plan.ps_takeovers] == [STANDBY] and not plan.create_pods
    assert sim.status["restarts"] == 1  # counted against backoffLimit as the restart it replaces


def test_a_failed_ps_pod_whose_policy_fails_the_job_is_not_taken_over() -> None:
    sim = running_job("Never")
    sim.add_standby()
    sim.set_phase("click-ps-0", "Failed", exit_code=1)
    plan = sim.step()
    assert not plan.ps_takeovers and sim.status["state"] == "Failed"


def test_before_the_job_ran_a_missing_ps_pod_is_made_not_taken_over() -> None:
    job = make_job("click", ps=1, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["replication"] = {"enabled": True, "standby": True}
    sim = TakeoverSim(job)
    sim.add_standby()
    plan = sim.step()
    assert not plan.ps_takeovers and "click-ps-0" in [p.name for p in plan.create_pods]


def test_the_standbys_are_read_only_when_a_running_job_lacks_a_ps_pod() -> None:
    sim = running_job()
    pods = [indexed.pod(p) for p in sim.pods.values()]
    assert not ps_takeover.standbys_needed(sim.job, pods)
    assert ps_takeover.standbys_needed(sim.job, [p for p in pods if p["metadata"]["name"] != "click-ps-0"])
    failed = json.loads(json.dumps(pods))
    for pod in failed:
        pod["status"]["phase"] = "Failed"
    assert ps_takeover.standbys_needed(sim.job, failed)
    plain = make_job("plain", ps=1, workers=1)
    plain["status"] = {"allPodsRunningTime": "2030-01-01T00:00:00Z"}
    assert not ps_takeover.standbys_needed(plain, [])  # no standbys asked for


def test_a_refused_takeover_leaves_the_record_as_it_was() -> None:
    old = {ps_takeover.FIELD: [{"replica": "ps-0", "pod": "a", "podUID": "1", "time": "t0", "count": 1}]}
    new = {ps_takeover.FIELD: [{"replica": "ps-0", "pod": "b", "podUID": "2", "time": "t1", "count": 2},
                               {"replica": "ps-1", "pod": "c", "podUID": "3", "time": "t1", "count": 1}]}
    refused = [plans.PSTakeover("ps-0", "b", "2", {}), plans.PSTakeover("ps-1", "c", "3", {})]
    assert ps_takeover.without_refused(new, old, refused) == old
    assert ps_takeover.without_refused(new, old, []) == new
