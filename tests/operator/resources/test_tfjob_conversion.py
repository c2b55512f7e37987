"""Kubeflow TFJobs as TrainingJobs: Kubeflow's own examples convert, validate against the CRD and build
the pods a TFJob would have had; TFJob's defaults are written out; every changed or dropped field warns."""

from __future__ import annotations

import copy
import io
import json
import pathlib
from typing import Any

import pytest
import yaml

from tensorgrid_operator import cli
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.api import tfjob_conversion as conversion
from tensorgrid_operator.resources import manifests

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "trainingjobs.tensorgrid.io.yaml"
KUBEFLOW_EXAMPLES = ROOT / "tests" / "operator" / "data" / "kubeflow_tfjob"
RT = spec_lib.ReplicaType


def example_tfjobs() -> list[pathlib.Path]:
    return sorted(p for p in KUBEFLOW_EXAMPLES.glob("*.yaml") if yaml.safe_load(p.read_text())["kind"] == "TFJob")


def crd_schema() -> dict[str, Any]:
    schema: dict[str, Any] = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def schema_errors(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """What the API server's structural validation would refuse (types, required, enums, bounds) and the
    fields it would prune (unknown ones). The CRD's CEL rules are checked on the control plane
    (tests/operator/controlplane/test_converted_tfjobs.py)."""
    kind = schema.get("type")
    types: dict[str, Any] = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool, "number": (int, float)}
    if kind in types and not isinstance(value, types[kind]) or kind in ("integer", "number") and value is True:
        return [f"{path}: {value!r} is not {kind}"]
    errors = [f"{path}: {value!r} not in {schema['enum']}"] if "enum" in schema and value not in schema["enum"] else []
    if "minimum" in schema and value < schema["minimum"] or "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} out of bounds")
    if kind == "object":
        properties = schema.get("properties") or {}
        errors += [f"{path}.{key}: required" for key in schema.get("required") or [] if key not in value]
        for key, child in value.items():
            if key in properties:
                errors += schema_errors(properties[key], child, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and path != ".metadata":
                errors.append(f"{path}.{key}: unknown field (pruned)")
    if kind == "array":
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        for index, item in enumerate(value):
            errors += schema_errors(schema.get("items") or {}, item, f"{path}[{index}]")
    return errors


def converted(tfjob: dict[str, Any]) -> conversion.Conversion:
    result = conversion.convert_tfjob(tfjob)
    assert schema_errors(crd_schema(), result.training_job) == []
    return result


def warned_fields(result: conversion.Conversion) -> list[str]:
    return [w.field for w in result.warnings]


def replica(count: int) -> dict[str, Any]:
    """A TFJob replica spec of ``count`` pods with one ``tensorflow`` container, running as a non-root uid."""
    return {"replicas": count, "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "tf:1.15", "command": ["python", "train.py"],
         "securityContext": {"runAsUser": 1000}}]}}}


def tfjob(**counts: int) -> dict[str, Any]:
    """A TFJob with these roles and replica counts."""
    specs = {role: replica(count) for role, count in counts.items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "mnist", "namespace": "team"},
            "spec": {"tfReplicaSpecs": specs}}


def build(training_job: dict[str, Any], rtype: RT, index: int) -> dict[str, Any]:
    job = copy.deepcopy(training_job)
    job["metadata"].setdefault("namespace", "team")
    job["metadata"]["uid"] = "uid-1"
    return manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(rtype, index))


def container_env(pod: dict[str, Any], name: str) -> dict[str, str]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


@pytest.mark.parametrize("path", example_tfjobs(), ids=lambda p: p.name)
def test_every_kubeflow_example_converts_to_a_valid_trainingjob(path: pathlib.Path) -> None:
    source = yaml.safe_load(path.read_text())
    result = converted(source)
    job = result.training_job
    assert (job["apiVersion"], job["kind"]) == ("tensorgrid.io/v1", "TrainingJob")
    assert job["metadata"] == source["metadata"]
    parsed = spec_lib.parse_spec(job["spec"])
    for key, entry in source["spec"]["tfReplicaSpecs"].items():
        template = copy.deepcopy(job["spec"]["replicaSpecs"][key]["template"])
        # the image's user, root included, as in the TFJob
        assert template["spec"].pop("securityContext") == {"runAsNonRoot": False}
        assert template == entry["template"]  # no port to rename in these
        assert parsed.replicas(RT(key)) == entry["replicas"]
    assert f"{{{','.join(source['spec']['tfReplicaSpecs'])}}}.template.spec.securityContext" in result.warnings[-1].field
    # TFJob's defaults, written out where TrainingJob's differ.
    assert parsed.run_policy.clean_pod_policy is spec_lib.CleanPodPolicy.NONE
    assert parsed.run_policy.backoff_limit == conversion.UNLIMITED_BACKOFF
    assert parsed.success_policy is spec_lib.SuccessPolicy.CHIEF


def test_dist_mnist_builds_the_pods_of_the_tfjob() -> None:
    source = yaml.safe_load((KUBEFLOW_EXAMPLES / "dist-mnist_tf_job_mnist.yaml").read_text())
    result = converted(source)
    # Chief, PS and Workers under restartPolicy Never mean the same here; only the image's user is written out
    assert warned_fields(result) == ["spec.tfReplicaSpecs.{Chief,PS,Worker}.template.spec.securityContext"]
    job = result.training_job
    assert {k: v["restartPolicy"] for k, v in job["spec"]["replicaSpecs"].items()} == {
        "Chief": "Never", "PS": "Never", "Worker": "Never"}
    pod = build(job, RT.WORKER, 1)
    assert pod["metadata"]["name"] == "dist-mnist-for-e2e-test-worker-1"
    config = json.loads(container_env(pod, "tensorflow")["TF_CONFIG"])
    assert config == {"cluster": {"chief": ["dist-mnist-for-e2e-test-chief-0.team.svc:2222"],
                                  "ps": ["dist-mnist-for-e2e-test-ps-0.team.svc:2222"],
                                  "worker": [f"dist-mnist-for-e2e-test-worker-{i}.team.svc:2222" for i in range(2)]},
                      "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    assert pod["spec"]["restartPolicy"] == "Never"


def test_tf_config_goes_to_the_tensorflow_container_and_tfjob_port_names_the_server() -> None:
    source = tfjob(PS=1, Worker=1)
    for entry in source["spec"]["tfReplicaSpecs"].values():
        containers = entry["template"]["spec"]["containers"]
        containers[0]["ports"] = [{"name": "tfjob-port", "containerPort": 3333}]
        containers.insert(0, {"name": "log-shipper", "image": "fluent-bit"})
    job = converted(source).training_job
    ports = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][1]["ports"]
    assert ports == [{"name": "tensorgrid", "containerPort": 3333}]
    pod = build(job, RT.WORKER, 0)
    assert "TF_CONFIG" not in container_env(pod, "log-shipper")
    config = json.loads(container_env(pod, "tensorflow")["TF_CONFIG"])
    assert config["cluster"] == {"ps": ["mnist-ps-0.team.svc:3333"], "worker": ["mnist-worker-0.team.svc:3333"]}
    assert source["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][1]["ports"][0]["name"] \
        == "tfjob-port"  # the input is left as it was


def test_master_and_lower_case_roles() -> None:
    result = converted(tfjob(master=1, ps=2, worker=3, evaluator=1))
    specs = result.training_job["spec"]["replicaSpecs"]
    assert list(specs) == ["Chief", "PS", "Worker", "Evaluator"]
    assert [specs[k]["replicas"] for k in specs] == [1, 2, 3, 1]
    assert "spec.tfReplicaSpecs.master" in warned_fields(result)
    assert "spec.tfReplicaSpecs.Evaluator" in warned_fields(result)  # outside TF_CONFIG's cluster here
    assert json.loads(container_env(build(result.training_job, RT.CHIEF, 0), "tensorflow")["TF_CONFIG"])["task"] \
        == {"type": "chief", "index": 0}


def test_run_policy_and_success_policy_carry_over() -> None:
    source = tfjob(Chief=1, PS=1, Worker=2)
    source["spec"]["runPolicy"] = {
        "cleanPodPolicy": "Running", "backoffLimit": 3, "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 60,
        "suspend": True, "schedulingPolicy": {"minAvailable": 4, "queue": "research", "priorityClass": "high",
                                              "scheduleTimeoutSeconds": 120, "minResources": {"cpu": "4"}},
        "managedBy": "kubeflow.org/training-operator"}
    source["spec"]["successPolicy"] = "AllWorkers"
    source["spec"]["enableDynamicWorker"] = True
    result = converted(source)
    spec = result.training_job["spec"]
    assert spec["runPolicy"] == {
        "cleanPodPolicy": "Running", "backoffLimit": 3, "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 60,
        "suspend": True, "schedulingPolicy": {"minAvailable": 4, "queue": "research", "priorityClass": "high",
                                              "scheduleTimeoutSeconds": 120}}
    assert "managedBy" not in spec
    assert spec["successPolicy"] == "Chief"  # a TFJob with a chief ignores AllWorkers
    assert warned_fields(result) == ["spec.runPolicy.managedBy", "spec.runPolicy.schedulingPolicy.minResources",
                                     "spec.successPolicy", "spec.enableDynamicWorker"]
    for warning in result.warnings:
        assert str(warning).startswith(warning.field + ": ") and len(warning.message) > 30


def test_all_workers_without_a_chief_and_multikueue() -> None:
    source = tfjob(PS=1, Worker=2)
    source["spec"]["successPolicy"] = "AllWorkers"
    source["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    result = converted(source)
    assert result.training_job["spec"]["successPolicy"] == "AllWorkers"
    assert result.training_job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert warned_fields(result) == ["spec.runPolicy.managedBy"]


@pytest.mark.parametrize("policy, warned", [("Never", False), ("ExitCode", True), ("OnFailure", True),
                                            ("Always", True)])
def test_restart_policies_keep_their_name_and_warn_where_they_differ(policy: str, warned: bool) -> None:
    source = tfjob(PS=1, Worker=2)
    source["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = policy
    result = converted(source)
    specs = result.training_job["spec"]["replicaSpecs"]
    assert (specs["Worker"]["restartPolicy"], specs["PS"]["restartPolicy"]) == (policy, "Never")
    assert ("spec.tfReplicaSpecs.Worker.restartPolicy" in warned_fields(result)) == warned


def test_what_the_api_server_set_is_dropped() -> None:
    source = tfjob(Worker=2)
    source["metadata"].update(uid="u", resourceVersion="9", generation=2, creationTimestamp="2026-01-01T00:00:00Z",
                              annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"},
                              finalizers=["x/y"])
    source["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    result = converted(source)
    assert result.training_job["metadata"] == {"name": "mnist", "namespace": "team", "annotations": {"team": "a"}}
    assert warned_fields(result) == ["metadata.finalizers", "status"]


@pytest.mark.parametrize("change, field", [
    (lambda j: j["spec"].pop("tfReplicaSpecs"), "spec.tfReplicaSpecs"),
    (lambda j: j["spec"]["tfReplicaSpecs"].update(Trainer=replica(1)), "spec.tfReplicaSpecs.Trainer"),
    (lambda j: j["spec"]["tfReplicaSpecs"].update(worker=replica(1)), "spec.tfReplicaSpecs.worker"),
    (lambda j: j["spec"]["tfReplicaSpecs"].update(Chief=replica(1), Master=replica(1)), "spec.tfReplicaSpecs.Master"),
    (lambda j: j["spec"]["tfReplicaSpecs"].update(Chief=replica(2)), "spec.tfReplicaSpecs.Chief.replicas"),
    (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"].update(restartPolicy="Sometimes"),
     "spec.tfReplicaSpecs.Worker.restartPolicy"),
    (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(name="main"),
     "spec.tfReplicaSpecs.Worker.template.spec.containers"),
    (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"].append(
        {"name": "tensorgrid", "image": "x"}), "spec.tfReplicaSpecs.Worker.template.spec.containers"),
    (lambda j: j["spec"].update(runPolicy={"cleanPodPolicy": "Some"}), "spec.runPolicy.cleanPodPolicy"),
    (lambda j: j["spec"].update(runPolicy={"backoffLimit": -1}), "spec.runPolicy.backoffLimit"),
    (lambda j: j["spec"].update(runPolicy={"schedulingPolicy": {"minAvailable": 5}}),
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    (lambda j: j["spec"].update(successPolicy="Chief"), "spec.successPolicy"),
    (lambda j: j["spec"]["tfReplicaSpecs"].pop("Worker"), "spec.tfReplicaSpecs"),
    (lambda j: j.update(apiVersion="kubeflow.org/v1beta2"), "apiVersion"),
])
def test_what_cannot_be_converted_is_an_error_naming_the_field(change: Any, field: str) -> None:
    source = tfjob(PS=1, Worker=2)
    change(source)
    with pytest.raises(conversion.ConversionError) as raised:
        conversion.convert_tfjob(source)
    assert raised.value.field == field and str(raised.value).startswith(field + ": ")


def run_cli(stdin: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.convert_tfjob(list(args) or ["-f", "-"], io.StringIO(stdin), out, err)
    return code, out.getvalue(), err.getvalue()


def test_command_converts_each_tfjob_of_a_stream_and_passes_the_rest() -> None:
    pvc = (KUBEFLOW_EXAMPLES / "distribution_strategy_pvc.yaml").read_text()
    simple = (KUBEFLOW_EXAMPLES / "simple.yaml").read_text()
    code, out, err = run_cli(f"{pvc}\n---\n{simple}\n---\n")
    assert code == 0
    documents = list(yaml.safe_load_all(out))
    assert documents[0] == yaml.safe_load(pvc)
    assert documents[1] == conversion.convert_tfjob(yaml.safe_load(simple)).training_job
    assert err.splitlines()[0] == (
        "warning: document 2 (TFJob kubeflow/tfjob-simple): spec.tfReplicaSpecs.Worker.restartPolicy: OnFailure: a "
        "retry is a new pod the operator creates (same name, emptyDir volumes and node not kept), not a container "
        "the kubelet restarts in place")
    assert err.splitlines()[1].startswith(
        "warning: document 2 (TFJob kubeflow/tfjob-simple): spec.tfReplicaSpecs.{Worker}.template.spec.securityContext:"
        " runAsNonRoot: false written")
    assert len(err.splitlines()) == 2


def test_command_converts_a_list_and_reads_a_file(tmp_path: pathlib.Path) -> None:
    listed = {"apiVersion": "kubeflow.org/v1", "kind": "TFJobList", "items": [tfjob(PS=1, Worker=1)]}
    path = tmp_path / "tfjobs.yaml"
    path.write_text(yaml.safe_dump(listed))
    code, out, err = run_cli("", "-f", str(path))
    assert code == 0 and err == ""
    document = yaml.safe_load(out)
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    assert document["items"][0]["kind"] == "TrainingJob"


def test_command_fails_naming_the_document_and_field_and_writes_nothing() -> None:
    bad = tfjob(PS=1, Worker=1)
    bad["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    code, out, err = run_cli(yaml.safe_dump_all([tfjob(Worker=1), bad]))
    assert (code, out) == (1, "")
    assert err.startswith("error: -: document 2 (TFJob team/mnist): spec.tfReplicaSpecs.Worker.restartPolicy: "
                          "unsupported value 'Sometimes'")
    assert run_cli("", "-f", "/nonexistent/tfjob.yaml")[0] == 1
    assert run_cli("a: [")[0] == 1


def test_main_container_is_tensorgrid_then_tensorflow_then_the_first() -> None:
    def main(*names: str) -> Any:
        container = manifests.main_container({"containers": [{"name": n} for n in names]})
        return container["name"] if container else None

    assert main("sidecar", "tensorflow", "tensorgrid") == "tensorgrid"
    assert main("sidecar", "tensorflow") == "tensorflow"
    assert main("sidecar", "trainer") == "sidecar"
    assert main() is None


def test_the_defaults_table_says_what_the_conversion_writes() -> None:
    rows = {line.split("|")[1].strip(): line for line in (ROOT / "docs" / "coming-from-tfjob.md").read_text().splitlines()
            if line.startswith("| ")}
    assert f"`{conversion.TFJOB_DEFAULT_RESTART_POLICY.value}`" in rows["`restartPolicy`"]
    assert f"`{conversion.TFJOB_DEFAULT_CLEAN_POD_POLICY.value}`" in rows["`runPolicy.cleanPodPolicy`"]
    assert str(conversion.UNLIMITED_BACKOFF) in rows["`runPolicy.backoffLimit`"]
    assert str(spec_lib.DEFAULT_BACKOFF_LIMIT) in rows["`runPolicy.backoffLimit`"]


def test_a_template_that_says_nothing_of_its_user_keeps_the_images() -> None:
    source = tfjob(PS=1, Worker=2)
    del source["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["securityContext"]
    source["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["securityContext"] = {"fsGroup": 2000}
    result = converted(source)
    specs = result.training_job["spec"]["replicaSpecs"]
    assert specs["Worker"]["template"]["spec"]["securityContext"] == {"fsGroup": 2000, "runAsNonRoot": False}
    assert "securityContext" not in specs["PS"]["template"]["spec"]  # its container runs as uid 1000
    assert warned_fields(result) == ["spec.tfReplicaSpecs.{Worker}.template.spec.securityContext"]
    pod = build(result.training_job, RT.WORKER, 0)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is False
