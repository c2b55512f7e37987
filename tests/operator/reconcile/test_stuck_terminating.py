"""Pods stuck Terminating on a dead or NotReady node: reported after a while, force-deleted when asked (no cluster)."""

from __future__ import annotations

import datetime

from operator_sim import Sim, make_job
from tensorgrid_operator.api import conditions
from tensorgrid_operator.reconcile import terminating


def running(sim: Sim) -> Sim:
    sim.step()
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running"
    return sim


def kubelet_gone(sim: Sim, pod: str, grace: float = 30.0) -> None:
    """The pod was deleted (a drain, the taint manager) and its node's kubelet never confirms it."""
    meta = sim.pods[pod]["metadata"]
    meta["deletionTimestamp"] = conditions.format_time(sim.now + datetime.timedelta(seconds=grace))
    sim.pods[pod]["spec"]["nodeName"] = "node-7"


def test_a_pod_terminating_past_its_grace_period_is_reported_once_then_cleared() -> None:
    sim = running(Sim(make_job(ps=1, workers=2)))
    sim.stuck = terminating.StuckPolicy(after_seconds=120)
    kubelet_gone(sim, "mnist-ps-0")
    plan = sim.step(10)
    assert sim.condition("StuckTerminating") == {}
    assert plan.requeue_after is not None and plan.requeue_after <= 140  # 30 s grace + 120 s, 10 s gone
    sim.step(140)
    cond = sim.condition("StuckTerminating")
    assert cond["status"] == "True" and cond["reason"] == "PodStuckTerminating"
    assert "mnist-ps-0 (node node-7, grace period ended at 2030-01-01T00:00:30Z)" in cond["message"]
    assert "kubectl delete pod --force" in cond["message"]
    assert sim.event_reasons().count("PodStuckTerminating") == 1
    assert "mnist-ps-0" in sim.pods and not sim.plans[-1].force_delete_pods
    sim.step(60)
    assert sim.event_reasons().count("PodStuckTerminating") == 1  # the same pods: no new Warning

    del sim.pods["mnist-ps-0"]  # the node came back, its kubelet finished the deletion
    sim.step()
    assert sim.condition("StuckTerminating")["status"] == "False"
    assert "mnist-ps-0" in sim.pods  # created again


def test_force_delete_removes_the_stuck_pod_and_its_replica_is_created_again() -> None:
    sim = running(Sim(make_job(ps=1, workers=2)))
    sim.stuck = terminating.StuckPolicy(after_seconds=60, force_delete=True)
    old_uid = sim.pods["mnist-worker-1"]["metadata"]["uid"]
    kubelet_gone(sim, "mnist-worker-1", grace=0)
    plan = sim.step(61)
    assert plan.force_delete_pods == [("mnist-worker-1", old_uid)]
    assert "force-deleting them" in sim.condition("StuckTerminating")["message"]
    sim.step()
    assert sim.pods["mnist-worker-1"]["metadata"]["uid"] != old_uid
    assert sim.condition("StuckTerminating")["status"] == "False"
    assert sim.status["restarts"] == 0


def test_a_pod_in_its_grace_period_is_not_stuck() -> None:
    sim = running(Sim(make_job(ps=1, workers=1)))
    kubelet_gone(sim, "mnist-worker-0", grace=3600)
    sim.step(3000)
    assert sim.condition("StuckTerminating") == {}
