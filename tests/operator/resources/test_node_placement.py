"""A job's pods across nodes, without a cluster: spread by hostname unless a template places its pods
itself, and tolerations that bound how long a pod stays on a lost node."""

from __future__ import annotations

from typing import Any

import pytest

from operator_sim import Sim, make_job
from tensorgrid_operator import cli
from tensorgrid_operator.controller import plan_application
from tensorgrid_operator.resources import jobobjects

SPREAD = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
           "labelSelector": {"matchLabels": {"tensorgrid.io/job-name": "mnist"}}}]


def _sent_pods(job: dict[str, Any], settings: jobobjects.JobObjectSettings) -> dict[str, dict[str, Any]]:
    """The job's first pods as the operator sends them to the API server."""
    return {p.name: jobobjects.with_pod_defaults(p.manifest(), settings) for p in Sim(job).plan().create_pods}


def _lost_node_tolerations(pod: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t for t in pod["spec"].get("tolerations", []) if t.get("key", "").startswith("node.kubernetes.io/")}


def test_every_pod_of_a_job_is_spread_over_nodes_by_default() -> None:
    pods = _sent_pods(make_job(ps=2, workers=3), jobobjects.JobObjectSettings())
    assert sorted(pods) == ["mnist-ps-0", "mnist-ps-1", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]
    for name, pod in pods.items():
        assert pod["spec"]["topologySpreadConstraints"] == SPREAD, name
        assert "affinity" not in pod["spec"], name


def test_spreading_can_be_turned_off() -> None:
    pods = _sent_pods(make_job(ps=1, workers=2), jobobjects.JobObjectSettings(spread_over_nodes=False))
    assert not [name for name, pod in pods.items() if "topologySpreadConstraints" in pod["spec"]]


@pytest.mark.parametrize("own", [
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}}},
    {"topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
                                    "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"team": "a"}}}]},
], ids=["affinity", "topologySpreadConstraints"])
def test_a_template_that_places_its_pods_decides(own: dict[str, Any]) -> None:
    job = make_job(ps=1, workers=2)
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"].update(own)
    pods = _sent_pods(job, jobobjects.JobObjectSettings())
    for name in ("mnist-worker-0", "mnist-worker-1"):
        for field, value in own.items():
            assert pods[name]["spec"][field] == value, name
        if "affinity" in own:
            assert "topologySpreadConstraints" not in pods[name]["spec"], name
    assert pods["mnist-ps-0"]["spec"]["topologySpreadConstraints"] == SPREAD


def test_operator_ps_anti_affinity_and_spreading_go_together() -> None:
    pods = _sent_pods(make_job(ps=2, workers=1), jobobjects.JobObjectSettings(ps_anti_affinity="preferred"))
    assert pods["mnist-ps-0"]["spec"]["topologySpreadConstraints"] == SPREAD
    assert "podAntiAffinity" in pods["mnist-ps-0"]["spec"]["affinity"]
    assert pods["mnist-worker-0"]["spec"]["topologySpreadConstraints"] == SPREAD


def test_pods_tolerate_a_lost_node_for_a_bounded_time() -> None:
    pods = _sent_pods(make_job(ps=1, workers=1), jobobjects.JobObjectSettings(node_lost_toleration_seconds=30))
    for name, pod in pods.items():
        assert _lost_node_tolerations(pod) == {
            taint: {"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
            for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")}, name
    default = _sent_pods(make_job(ps=1, workers=1), jobobjects.JobObjectSettings(node_lost_toleration_seconds=None))
    assert not [name for name, pod in default.items() if _lost_node_tolerations(pod)]


def test_a_templates_own_toleration_of_a_lost_node_wins_for_its_taint() -> None:
    job = make_job(ps=1, workers=1)
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 600}
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["tolerations"] = [own, gpu]
    pod = _sent_pods(job, jobobjects.JobObjectSettings(node_lost_toleration_seconds=10))["mnist-ps-0"]
    assert pod["spec"]["tolerations"][:2] == [own, gpu]
    assert _lost_node_tolerations(pod)["node.kubernetes.io/not-ready"]["tolerationSeconds"] == 10
    assert _lost_node_tolerations(pod)["node.kubernetes.io/unreachable"] == own


def test_the_plan_pod_is_not_changed() -> None:
    plan_pod = next(p for p in Sim(make_job(ps=1, workers=1)).plan().create_pods if p.name == "mnist-worker-0")
    before = plan_pod.manifest()
    jobobjects.with_pod_defaults(before, jobobjects.JobObjectSettings())
    assert "topologySpreadConstraints" not in before["spec"] and "tolerations" not in before["spec"]


def test_the_command_line_sets_both_and_names_a_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    defaults = plan_application.job_object_settings(cli.parse_args([]))
    assert (defaults.spread_over_nodes, defaults.node_lost_toleration_seconds) == (True, 30)
    settings = plan_application.job_object_settings(
        cli.parse_args(["--no-spread-pods", "--node-lost-toleration-seconds", "5"]))
    assert (settings.spread_over_nodes, settings.node_lost_toleration_seconds) == (False, 5)
    assert cli.parse_args(["--node-lost-toleration-seconds", "off"]).node_lost_toleration_seconds is None
    for bad in ("-1", "soon", "2.5"):
        with pytest.raises(SystemExit):
            cli.parse_args(["--node-lost-toleration-seconds", bad])
        err = capsys.readouterr().err
        assert f"--node-lost-toleration-seconds {bad!r}" in err and "'off'" in err, err
