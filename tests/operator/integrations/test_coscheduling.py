"""Gang scheduling done by a real gang scheduler: a job never starts half-scheduled.

scheduler-plugins' Coscheduling (gang_scheduler.py) schedules the pods of the operator
(``--gang-scheduler scheduler-plugins``) onto KWOK nodes of a few CPUs each (kwok_nodes.py),
and its controller keeps each PodGroup's phase; the jobs' pods request one CPU each. What
is checked is what a user sees: which pods are bound to a node, the job's state and the
reason it gives, the PodGroup's phase. The same two jobs under the default scheduler
(``--gang-scheduler none``) end half-scheduled, which is what the gang scheduler prevents.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gang_clusters import GangCluster, bound, gang_cluster, one_cpu_job
from operator_cluster import ControlPlane, Namespace, wait_for
from tensorgrid_operator.resources import podgroups

pytestmark = [pytest.mark.controlplane, pytest.mark.kwok, pytest.mark.third_party]

# The group's status read every 2 s, and a group not placed for 5 s said so (the defaults: 10 s, 60 s).
PLUGINS = podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS, status_interval_seconds=2, unscheduled_seconds=5)
API = podgroups.APIS[podgroups.SCHEDULER_PLUGINS]
# Long enough for the scheduler to try a waiting group several times (its Permit wait is 5 s).
WATCH_SECONDS = 15


def _group_status(namespace: Namespace, name: str) -> dict[str, Any]:
    group = namespace.cp.custom.get_namespaced_custom_object(API.group, API.version, namespace.name, API.plural, name)
    return dict(group.get("status") or {})


def _scheduler_said(namespace: Namespace, job: str, pods: int) -> bool:
    """Every one of the job's ``pods`` exists and carries the scheduler's verdict (PodScheduled False)."""
    found = namespace.pods(job)
    return len(found) == pods and all(
        any(c["type"] == "PodScheduled" and c["status"] == "False" for c in p["status"].get("conditions") or [])
        for p in found.values())


def _never_bound_while_watched(namespace: Namespace, job: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        placed = bound(namespace, job)
        assert placed == {}, f"pods of {job} were bound while the whole group did not fit: {placed}"
        time.sleep(0.2)


def _why_waiting(namespace: Namespace, job: str) -> str:
    """What the job's status says about its pending pods (the Running condition's message)."""
    return str(namespace.condition(job, "Running").get("message") or "")


def _pod_group_said(namespace: Namespace, job: str) -> dict[str, Any]:
    """What ``kubectl get tj -o yaml`` shows of the job's PodGroup: status.podGroup and PodGroupScheduled."""
    return {"podGroup": namespace.status(job).get("podGroup") or {},
            "condition": namespace.condition(job, "PodGroupScheduled")}


def test_a_job_that_does_not_fit_binds_no_pod_until_capacity_is_added(controlplane: ControlPlane) -> None:
    with gang_cluster(controlplane, PLUGINS, nodes=2) as c:
        ns = c.namespace
        # 2 nodes of 2 CPUs: "small" (2 pods) runs, leaving 2 CPUs; "big" (4 pods) needs 4.
        ns.apply(one_cpu_job("small", ps=1, workers=1, node_label=c.node_label))
        ns.wait_state("small", "Running", timeout=90)
        assert len(bound(ns, "small")) == 2
        wait_for(lambda: _group_status(ns, "small").get("phase") == "Running", 60,
                 "the PodGroup of small to be Running", lambda: _group_status(ns, "small"))

        ns.apply(one_cpu_job("big", ps=1, workers=3, node_label=c.node_label))
        wait_for(lambda: _scheduler_said(ns, "big", 4), 60, "the scheduler's verdict on big's 4 pods",
                 lambda: {n: p["status"] for n, p in ns.pods("big").items()})
        _never_bound_while_watched(ns, "big", WATCH_SECONDS)
        group = _group_status(ns, "big")
        assert group.get("phase") != "Running" and not group.get("running"), group
        status = ns.status("big")
        assert status["state"] != "Running", status
        message = _why_waiting(ns, "big")
        assert "Unschedulable" in message and "big-ps-0" in message, status
        assert "gang scheduled: its PodGroup big has pods placed only when 4 of them (minMember) fit together" \
            in message, message
        warnings = [e["message"] for e in ns.events("big") if e["reason"] == "Unschedulable"]
        assert warnings and "gang scheduled" in warnings[0], warnings  # what `kubectl describe tj big` shows
        # The scheduler's view, in the job's status: the group's phase and counts, and once it has waited
        # longer than --gang-unscheduled-seconds, PodGroupScheduled False saying why, with a Warning.
        wait_for(lambda: _pod_group_said(ns, "big")["condition"].get("status") == "False", 30,
                 "PodGroupScheduled False on big", lambda: _pod_group_said(ns, "big"))
        said = _pod_group_said(ns, "big")
        assert said["podGroup"]["name"] == "big" and said["podGroup"]["minMember"] == 4, said
        assert said["podGroup"]["phase"] == group.get("phase") and said["podGroup"]["running"] == 0, said
        assert said["podGroup"]["unscheduledSince"], said
        assert said["condition"]["reason"] == "PodGroupNotScheduled", said
        assert said["condition"]["message"].startswith(
            f"PodGroup big (phase {group.get('phase')}): 4 of 4 pods cannot be scheduled; the gang scheduler places "
            f"them only when 4 (minMember) fit together: the scheduler says of pod"), said
        assert [e["type"] for e in ns.events("big") if e["reason"] == "PodGroupNotScheduled"] == ["Warning"]
        assert ns.condition("small", "PodGroupScheduled") == {}, "placed at once: nothing to say"
        assert ns.status("small")["podGroup"]["phase"] == "Running", ns.status("small")

        # One more node of 2 CPUs: now the whole group fits, and all of it is bound.
        c.kwok.add(f"{c.kwok.names[0].rsplit('-', 1)[0]}-2")
        ns.wait_state("big", "Running", timeout=90)
        assert set(bound(ns, "big")) == {"big-ps-0", "big-worker-0", "big-worker-1", "big-worker-2"}
        wait_for(lambda: _group_status(ns, "big").get("phase") == "Running", 60,
                 "the PodGroup of big to be Running", lambda: _group_status(ns, "big"))
        assert ns.status("small")["state"] == "Running"
        wait_for(lambda: _pod_group_said(ns, "big")["podGroup"].get("phase") == "Running", 30,
                 "status.podGroup of big Running", lambda: _pod_group_said(ns, "big"))
        said = _pod_group_said(ns, "big")
        assert said["podGroup"]["running"] == 4 and "unscheduledSince" not in said["podGroup"], said
        assert said["condition"]["status"] == "True" and said["condition"]["reason"] == "PodGroupScheduled", said
        assert any(e["type"] == "Normal" for e in ns.events("big") if e["reason"] == "PodGroupScheduled")

        # A deleted PodGroup: its next pod would never be placed ("PodGroup not found"), so the operator
        # creates the group again before it, and the replaced pod runs.
        ns.cp.custom.delete_namespaced_custom_object(API.group, API.version, ns.name, API.plural, "small")
        old_uid = ns.pods("small")["small-worker-0"]["metadata"]["uid"]
        ns.cp.core.delete_namespaced_pod("small-worker-0", ns.name)
        wait_for(lambda: (ns.pods("small").get("small-worker-0", {}).get("metadata", {}).get("uid") not in
                          (None, old_uid)) and "small-worker-0" in bound(ns, "small"), 90,
                 "a new small-worker-0 bound", lambda: ns.pods("small").get("small-worker-0", {}).get("status"))
        ns.wait_state("small", "Running", timeout=60)
        assert any(e["reason"] == "RecreatedPodGroup" for e in ns.events("small"))


def _two_jobs_that_fit_one_at_a_time(c: GangCluster) -> None:
    """2 nodes of 2 CPUs; jobs a and b of 3 one-CPU pods each, applied together: 6 pods for 4 CPUs."""
    for name in ("a", "b"):
        c.namespace.apply(one_cpu_job(name, ps=1, workers=2, node_label=c.node_label))


def test_two_jobs_that_fit_one_at_a_time_run_one_after_the_other_never_half(controlplane: ControlPlane) -> None:
    with gang_cluster(controlplane, PLUGINS, nodes=2) as c:
        ns = c.namespace
        _two_jobs_that_fit_one_at_a_time(c)
        wait_for(lambda: any(ns.status(j).get("state") == "Running" for j in ("a", "b")), 90, "one job Running",
                 lambda: {j: (bound(ns, j), ns.status(j).get("state")) for j in ("a", "b")})
        first, second = ("a", "b") if ns.status("a").get("state") == "Running" else ("b", "a")
        wait_for(lambda: _scheduler_said(ns, second, 3), 60, f"the scheduler's verdict on {second}'s 3 pods")
        # Watched for a while: one job whole, the other with no pod bound (not 2 + 2, which would hold forever).
        _never_bound_while_watched(ns, second, WATCH_SECONDS)
        assert len(bound(ns, first)) == 3
        assert ns.status(second)["state"] != "Running"

        # The first job ends (deleted): its CPUs go to the second, whole.
        ns.cp.custom.delete_namespaced_custom_object("tensorgrid.io", "v1", ns.name, "trainingjobs", first)
        ns.wait_state(second, "Running", timeout=120)
        assert len(bound(ns, second)) == 3


def test_without_a_gang_scheduler_the_same_two_jobs_end_half_scheduled(controlplane: ControlPlane) -> None:
    """The contrast: the default scheduler binds pod by pod, so 4 of the 6 pods are bound and a job is split."""
    with gang_cluster(controlplane, podgroups.GangSettings(), nodes=2) as c:
        ns = c.namespace
        _two_jobs_that_fit_one_at_a_time(c)
        wait_for(lambda: len(bound(ns, "a")) + len(bound(ns, "b")) == 4, 90, "4 pods bound",
                 lambda: {j: bound(ns, j) for j in ("a", "b")})
        split = [j for j in ("a", "b") if 0 < len(bound(ns, j)) < 3]
        assert split, {j: bound(ns, j) for j in ("a", "b")}

