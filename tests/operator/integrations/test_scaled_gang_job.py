"""A gang-scheduled job scaled while it runs, under a real gang scheduler (scheduler-plugins' Coscheduling on
KWOK nodes, gang_clusters.py): scaled down, its PodGroup's minMember follows, so a pod it replaces afterwards
is placed (against a group of the old size, Coscheduling would hold it forever: the group has fewer pods than
minMember); scaled up again, the added workers are placed, and the group counts them."""

from __future__ import annotations

import pytest

from gang_clusters import bound, gang_cluster, one_cpu_job
from operator_cluster import ControlPlane, wait_for
from tensorgrid_operator.resources import podgroups

pytestmark = [pytest.mark.controlplane, pytest.mark.kwok, pytest.mark.third_party]

PLUGINS = podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS, status_interval_seconds=2, unscheduled_seconds=5)
API = podgroups.APIS[podgroups.SCHEDULER_PLUGINS]


def test_a_pod_replaced_after_a_scale_down_is_placed_and_a_scale_up_is_placed_whole(
        controlplane: ControlPlane) -> None:
    with gang_cluster(controlplane, PLUGINS, nodes=2) as c:
        ns = c.namespace

        def min_member() -> int:
            group = ns.cp.custom.get_namespaced_custom_object(API.group, API.version, ns.name, API.plural, "elastic")
            return int(group["spec"]["minMember"])

        def scale(workers: int) -> None:
            scaled = ns.cp.kubectl("scale", "tj/elastic", "-n", ns.name, f"--replicas={workers}", check=False)
            assert scaled.returncode == 0, scaled.stderr

        # 2 nodes of 2 CPUs, 4 one-CPU pods: the whole group fits.
        ns.apply(one_cpu_job("elastic", ps=1, workers=3, node_label=c.node_label))
        ns.wait_state("elastic", "Running", timeout=90)
        assert len(bound(ns, "elastic")) == 4 and min_member() == 4

        scale(1)
        wait_for(lambda: set(ns.pods("elastic")) == {"elastic-ps-0", "elastic-worker-0"}, 60,
                 "workers 1 and 2 removed", lambda: sorted(ns.pods("elastic")))
        assert min_member() == 2
        old_uid = ns.pods("elastic")["elastic-worker-0"]["metadata"]["uid"]
        ns.cp.core.delete_namespaced_pod("elastic-worker-0", ns.name)
        wait_for(lambda: ns.pods("elastic").get("elastic-worker-0", {}).get("metadata", {}).get("uid")
                 not in (None, old_uid) and "elastic-worker-0" in bound(ns, "elastic"), 90,
                 "the replaced elastic-worker-0 bound",
                 lambda: ns.pods("elastic").get("elastic-worker-0", {}).get("status"))

        scale(3)
        wait_for(lambda: set(bound(ns, "elastic")) == {"elastic-ps-0", *(f"elastic-worker-{i}" for i in range(3))},
                 90, "the added workers bound", lambda: bound(ns, "elastic"))
        assert min_member() == 4
        reasons = [e["message"].split(",")[0] for e in ns.events("elastic") if e["reason"] == "ResizedPodGroup"]
        assert sorted(reasons) == ["PodGroup elastic: minMember 2 -> 4", "PodGroup elastic: minMember 4 -> 2"]
