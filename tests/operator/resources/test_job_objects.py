"""The NetworkPolicy, PodDisruptionBudget and pod defaults of a job, without a cluster."""

from __future__ import annotations

import pytest

from operator_sim import Sim, make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator import cli
from tensorgrid_operator.resources import jobobjects

PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


def test_network_policy_admits_the_jobs_pods_and_the_metrics_peers_only() -> None:
    job = make_job(ps=1, workers=2)
    policy = jobobjects.network_policy(job, jobobjects.JobObjectSettings(metrics_peers=(PROMETHEUS,)))
    assert policy["metadata"]["name"] == "mnist" and policy["metadata"]["ownerReferences"][0]["uid"] == \
        job["metadata"]["uid"]
    own = {"podSelector": {"matchLabels": {"tensorgrid.io/job-name": "mnist"}}}
    assert policy["spec"] == {
        "podSelector": own["podSelector"], "policyTypes": ["Ingress"],
        "ingress": [{"from": [own]}, {"from": [PROMETHEUS], "ports": [{"port": "metrics", "protocol": "TCP"}]}]}
    alone = jobobjects.network_policy(job, jobobjects.JobObjectSettings())
    assert alone["spec"]["ingress"] == [{"from": [own]}]


@pytest.mark.parametrize("text, error", [
    ("{", "is not JSON"),
    ('{"podSelector": {}}', "is not a list"),
    ('[{"podSelektor": {}}]', 'peer {"podSelektor": {}} is not a NetworkPolicy peer'),
    ('[{}]', "peer {} is not a NetworkPolicy peer"),
    ('[{"ipBlock": "10.0.0.0/8"}]', "each an object"),
])
def test_bad_metrics_peers_are_refused_naming_the_value(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("{", r"\{").replace("}", r"\}")):
        jobobjects.parse_metrics_peers(text)


def test_the_command_line_refuses_bad_peers_and_anti_affinity(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse_args(["--network-policy-metrics-from", '[{"podSelektor": {}}]'])
    assert "podSelektor" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.parse_args(["--ps-anti-affinity", "sometimes"])
    assert "sometimes" in capsys.readouterr().err
    settings = cli.parse_args(["--no-network-policy", "--no-ps-disruption-budget", "--ps-anti-affinity", "required",
                               "--network-policy-metrics-from", '[{"ipBlock": {"cidr": "10.0.0.0/8"}}]'])
    assert (settings.network_policy, settings.ps_disruption_budget, settings.ps_anti_affinity) == \
        (False, False, "required")
    assert settings.network_policy_metrics_from == ({"ipBlock": {"cidr": "10.0.0.0/8"}},)


def test_the_ps_budget_keeps_drains_off_ready_parameter_servers() -> None:
    job = make_job(ps=2, workers=2)
    budget = jobobjects.ps_disruption_budget(job, spec_lib.parse_spec(job["spec"]))
    assert budget is not None and budget["metadata"]["name"] == "mnist-ps"
    assert budget["spec"] == {"minAvailable": 2, "unhealthyPodEvictionPolicy": "AlwaysAllow", "selector": {
        "matchLabels": {"tensorgrid.io/job-name": "mnist", "tensorgrid.io/replica-type": "ps"}}}
    no_ps = make_job(workers=2)
    assert jobobjects.ps_disruption_budget(no_ps, spec_lib.parse_spec(no_ps["spec"])) is None


@pytest.mark.parametrize("mode", ["preferred", "required"])
def test_ps_anti_affinity_spreads_parameter_servers_only(mode: str) -> None:
    sim = Sim(make_job(ps=2, workers=1))
    plan = sim.plan()
    built = {p.name: p.manifest() for p in plan.create_pods}
    pods = {name: jobobjects.with_pod_defaults(p, jobobjects.JobObjectSettings(ps_anti_affinity=mode))
            for name, p in built.items()}
    anti = pods["mnist-ps-1"]["spec"]["affinity"]["podAntiAffinity"]
    terms = (anti["requiredDuringSchedulingIgnoredDuringExecution"] if mode == "required"
             else [t["podAffinityTerm"] for t in anti["preferredDuringSchedulingIgnoredDuringExecution"]])
    assert terms == [{"labelSelector": {"matchLabels": {"tensorgrid.io/job-name": "mnist",
                                                        "tensorgrid.io/replica-type": "ps"}},
                      "topologyKey": "kubernetes.io/hostname"}]
    assert "affinity" not in pods["mnist-worker-0"]["spec"]
    assert "affinity" not in built["mnist-ps-0"]["spec"], "the plan's pod is not changed"


def test_a_templates_own_anti_affinity_wins() -> None:
    job = make_job(ps=1, workers=1)
    own = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"team": "a"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
    job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["affinity"] = own
    pod = next(p.manifest() for p in Sim(job).plan().create_pods if p.name == "mnist-ps-0")
    assert jobobjects.with_pod_defaults(pod, jobobjects.JobObjectSettings(ps_anti_affinity="required"))[
        "spec"]["affinity"] == own


def test_training_pods_get_no_service_account_token_unless_the_template_asks() -> None:
    job = make_job(ps=1, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["automountServiceAccountToken"] = True
    pods = {p.name: p.manifest() for p in Sim(job).plan().create_pods}
    assert pods["mnist-worker-0"]["spec"]["automountServiceAccountToken"] is False
    assert pods["mnist-ps-0"]["spec"]["automountServiceAccountToken"] is True
