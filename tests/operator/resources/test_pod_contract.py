"""The operator side of the TF_CONFIG and pod contract, and the CRD agreeing with the code."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator import cli
from tensorgrid_operator.resources import manifests

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "trainingjobs.tensorgrid.io.yaml"
RT = spec_lib.ReplicaType


def build(job: dict[str, Any], rtype: RT, index: int) -> dict[str, Any]:
    return manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(rtype, index))


def env(pod: dict[str, Any], container: int = 0) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][container].get("env", [])}


def test_tf_config_is_kubeflow_compatible() -> None:
    pod = build(make_job(ps=2, workers=3), RT.WORKER, 1)
    assert json.loads(env(pod)["TF_CONFIG"]) == {
        "cluster": {
            "ps": ["mnist-ps-0.team.svc:2222", "mnist-ps-1.team.svc:2222"],
            "worker": ["mnist-worker-0.team.svc:2222", "mnist-worker-1.team.svc:2222",
                       "mnist-worker-2.team.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert env(pod)["TENSORGRID_METRICS_PORT"] == "9090"
    assert env(pod)["TENSORGRID_DATA_PORT"] == "2223"


def test_evaluator_is_outside_the_cluster_but_knows_it() -> None:
    job = make_job(ps=1, workers=1, chief=1, evaluators=1)
    config = json.loads(env(build(job, RT.EVALUATOR, 0))["TF_CONFIG"])
    assert set(config["cluster"]) == {"chief", "ps", "worker"}
    assert config["task"] == {"type": "evaluator", "index": 0}


@pytest.mark.parametrize("chief, rtype, index, role", [
    (0, RT.WORKER, 0, "chief"), (0, RT.WORKER, 1, None), (1, RT.CHIEF, 0, "chief"), (1, RT.WORKER, 0, None),
    (0, RT.PS, 0, None),
])
def test_labels(chief: int, rtype: RT, index: int, role: Any) -> None:
    labels = build(make_job(ps=1, workers=2, chief=chief), rtype, index)["metadata"]["labels"]
    assert labels[spec_lib.LABEL_JOB_NAME] == "mnist"
    assert labels[spec_lib.LABEL_REPLICA_TYPE] == rtype.task_type
    assert labels[spec_lib.LABEL_REPLICA_INDEX] == str(index)
    assert labels.get(spec_lib.LABEL_JOB_ROLE) == role
    assert labels[spec_lib.LABEL_RESTART_EPOCH] == "0"


def test_the_restart_epoch_is_a_pod_label() -> None:
    job = make_job(ps=1, workers=1)
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.PS, 0), epoch=3)
    assert pod["metadata"]["labels"][spec_lib.LABEL_RESTART_EPOCH] == "3"


def test_pod_shape() -> None:
    job = make_job(ps=1, workers=1)
    template = job["spec"]["replicaSpecs"]["Worker"]["template"]
    template["metadata"] = {"labels": {"team": "vision"}, "annotations": {"a": "b"}}
    template["spec"]["restartPolicy"] = "Always"
    template["spec"]["containers"] = [
        {"name": "sidecar", "image": "proxy"},
        {"name": "tensorgrid", "image": "tg",
         "env": [{"name": "TF_CONFIG", "value": "stale"}, {"name": "X", "value": "1"}],
         "ports": [{"name": "metrics", "containerPort": 9090}]},
    ]
    pod = build(job, RT.WORKER, 0)
    assert pod["metadata"]["name"] == "mnist-worker-0" and pod["metadata"]["namespace"] == "team"
    assert pod["metadata"]["labels"]["team"] == "vision" and pod["metadata"]["annotations"] == {"a": "b"}
    assert pod["spec"]["restartPolicy"] == "Never"
    assert env(pod, 0) == {}  # only the main container gets TF_CONFIG
    assert env(pod, 1)["X"] == "1" and env(pod, 1)["TF_CONFIG"] != "stale"
    assert [(p["name"], p["containerPort"]) for p in pod["spec"]["containers"][1]["ports"]] == [
        ("metrics", 9090), ("tensorgrid", 2222), ("tensorgrid-data", 2223)]
    owner = pod["metadata"]["ownerReferences"][0]
    assert owner["controller"] is True and owner["kind"] == "TrainingJob" and owner["uid"] == job["metadata"]["uid"]
    # the template in the job is untouched
    assert job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][1]["env"][0]["value"] == "stale"


def test_a_port_named_tensorgrid_overrides_2222() -> None:
    job = make_job(ps=1, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "tensorgrid", "containerPort": 5000}]
    config = json.loads(env(build(job, RT.WORKER, 0))["TF_CONFIG"])
    assert config["cluster"]["ps"] == ["mnist-ps-0.team.svc:5000"]
    service = manifests.build_service(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.PS, 0))
    assert service["spec"]["ports"][0]["port"] == 5000
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]}["tensorgrid-data"] == 5001


def test_a_port_named_tensorgrid_data_sets_the_data_channel_port() -> None:
    job = make_job(ps=1, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "tensorgrid-data", "containerPort": 7000}]
    pod = build(job, RT.PS, 0)
    assert env(pod)["TENSORGRID_DATA_PORT"] == "7000"
    assert ("tensorgrid-data", 7000) in [(p["name"], p["containerPort"]) for p in pod["spec"]["containers"][0]["ports"]]
    service = manifests.build_service(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.PS, 0))
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "tensorgrid": 2222, "tensorgrid-data": 7000, "metrics": 9090}


@pytest.mark.parametrize("success_policy, run_policy, template_value, grace", [
    ("AllWorkers", None, None, str(30 * 24 * 3600)),                  # outlive every worker
    ("AllWorkers", {"activeDeadlineSeconds": 7200}, None, "7200"),    # the job cannot run longer
    ("AllWorkers", None, "900", "900"),                                # the template's own value wins
    ("Chief", None, None, None),                                       # the runtime's 60 s after the chief
    (None, {"activeDeadlineSeconds": 7200}, None, None),
])
def test_the_ps_waits_for_every_worker_under_all_workers(success_policy: Any, run_policy: Any,
                                                         template_value: Any, grace: Any) -> None:
    job = make_job(ps=1, workers=2, success_policy=success_policy, run_policy=run_policy)
    if template_value is not None:
        job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "TENSORGRID_PS_GRACE_SECONDS", "value": template_value}]
    assert env(build(job, RT.PS, 0)).get("TENSORGRID_PS_GRACE_SECONDS") == grace
    assert "TENSORGRID_PS_GRACE_SECONDS" not in env(build(job, RT.WORKER, 1)), "only parameter servers wait"


@pytest.mark.parametrize("resources, threads", [
    ({"requests": {"cpu": "250m"}}, "1"),                          # a fraction of a core: one thread
    ({"requests": {"cpu": "1500m"}}, "2"),                         # rounded up
    ({"requests": {"cpu": 3}}, "3"),                               # a YAML number
    ({"requests": {"cpu": "0.5"}, "limits": {"cpu": "4"}}, "4"),   # the limit wins over the request
    ({"requests": {"memory": "1Gi"}}, None),                       # no CPU: the runtime's own default
    ({"requests": {"cpu": "lots"}}, None),                         # the API server refuses the pod
    ({}, None),
])
def test_blas_threads_follow_the_containers_cpu(resources: Any, threads: Any) -> None:
    job = make_job(ps=1, workers=1)
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = resources
    assert env(build(job, RT.WORKER, 0)).get("TENSORGRID_INTRA_OP_THREADS") == threads


def test_blas_threads_set_in_the_template_win() -> None:
    job = make_job(ps=1, workers=1)
    container = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "250m"}}
    container["env"] = [{"name": "TENSORGRID_INTRA_OP_THREADS", "value": "8"}]
    assert env(build(job, RT.WORKER, 0))["TENSORGRID_INTRA_OP_THREADS"] == "8"


def test_headless_service() -> None:
    job = make_job(ps=1, workers=1)
    service = manifests.build_service(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.WORKER, 0))
    assert service["metadata"]["name"] == "mnist-worker-0"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {spec_lib.LABEL_JOB_NAME: "mnist", spec_lib.LABEL_REPLICA_TYPE: "worker",
                                           spec_lib.LABEL_REPLICA_INDEX: "0"}
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "tensorgrid": 2222, "tensorgrid-data": 2223, "metrics": 9090}
    assert service["metadata"]["ownerReferences"][0]["controller"] is True


def test_main_container_is_the_first_without_one_named_tensorgrid() -> None:
    assert manifests.main_container({"containers": [{"name": "a"}, {"name": "b"}]}) == {"name": "a"}


# --- the CRD and the code agree ------------------------------------------------------------------------

def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_crd_enums_and_defaults_match_the_code() -> None:
    spec = crd_schema()["properties"]["spec"]["properties"]
    replica_types = spec["replicaSpecs"]["properties"]
    assert set(replica_types) == {t.value for t in RT}
    worker = replica_types["Worker"]["properties"]
    assert worker["restartPolicy"]["enum"] == [p.value for p in spec_lib.RestartPolicy]
    run = spec["runPolicy"]["properties"]
    assert run["cleanPodPolicy"]["enum"] == [p.value for p in spec_lib.CleanPodPolicy]
    assert spec["successPolicy"]["enum"] == [p.value for p in spec_lib.SuccessPolicy]
    parsed = spec_lib.parse_spec({"replicaSpecs": {"Worker": {"template": {}}}})
    assert parsed.replica_specs[RT.WORKER].restart_policy.value == worker["restartPolicy"]["default"]
    assert parsed.replica_specs[RT.WORKER].replicas == worker["replicas"]["default"]
    assert parsed.run_policy.clean_pod_policy.value == run["cleanPodPolicy"]["default"]
    assert parsed.run_policy.backoff_limit == run["backoffLimit"]["default"]
    assert parsed.success_policy.value == spec["successPolicy"]["default"]


def test_crd_describes_every_field() -> None:
    missing: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        for name, child in (node.get("properties") or {}).items():
            if name not in ("metadata", "apiVersion", "kind") and "description" not in child:
                missing.append(f"{path}.{name}")
            walk(child, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.*")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    walk(crd_schema()["properties"]["spec"], "spec")
    walk(crd_schema()["properties"]["status"], "status")
    assert missing == []


def test_command_line() -> None:
    settings = cli.parse_args(["-n", "a", "--namespace", "b", "--metrics-port", "off", "--standalone"])
    assert settings.namespaces == ("a", "b")
    assert settings.metrics_port is None and settings.peering is None
    assert cli.parse_args([]).namespaces == ()
    defaults = cli.parse_args([])
    assert (defaults.retry_delay_seconds, defaults.max_retry_delay_seconds) == (10, 300)
    delays = cli.parse_args(["--retry-delay-seconds", "2", "--max-retry-delay-seconds", "60"])
    assert (delays.retry_delay_seconds, delays.max_retry_delay_seconds) == (2, 60)
    with pytest.raises(SystemExit):
        cli.parse_args(["--retry-delay-seconds", "600"])  # above the 300 s maximum


def test_operator_never_imports_the_runtime() -> None:
    sources = (ROOT / "operator" / "tensorgrid_operator").rglob("*.py")
    offenders = [p.name for p in sources
                 if any(line.startswith(("import tensorgrid\n", "from tensorgrid import", "from tensorgrid.",
                                         "import tensorgrid."))
                        for line in p.read_text().splitlines(keepends=True))]
    assert offenders == []


def test_only_the_controller_imports_kopf() -> None:
    sources = (ROOT / "operator" / "tensorgrid_operator").rglob("*.py")
    importers = {p.parent.name for p in sources if "\nimport kopf" in p.read_text() or "\nfrom kopf" in p.read_text()}
    assert importers == {"controller"}
