"""spec.tensorboard: the TensorBoard Deployment, Service and NetworkPolicy of a job, and the command
that opens it, without a cluster; and the creation of those objects through ``ensure_objects``."""

from __future__ import annotations

import asyncio
import io
from typing import Any, Optional

import pytest

from operator_sim import container, make_job
from tensorgrid_operator import cli
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.resources import jobobjects
from tensorgrid_operator.resources import tensorboard

CLAIM = {"name": "logs", "persistentVolumeClaim": {"claimName": "mnist-logs"}}


def _job(log_dir: str = "/logs/mnist", volumes: Optional[list[dict[str, Any]]] = None,
         mounts: Optional[list[dict[str, Any]]] = None, **board: Any) -> dict[str, Any]:
    job = make_job(ps=1, workers=2)
    pod_spec = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod_spec["containers"][0]["volumeMounts"] = mounts if mounts is not None else [{"name": "logs", "mountPath": "/logs"}]
    pod_spec["volumes"] = volumes if volumes is not None else [CLAIM]
    pod_spec["securityContext"] = {"fsGroup": 10001}
    job["spec"]["tensorboard"] = {"enabled": True, "logDir": log_dir, **board}
    return job


def _spec(job: dict[str, Any]) -> spec_lib.JobSpec:
    return spec_lib.parse_spec(job["spec"])


def test_the_deployment_runs_tensorboard_on_the_workers_log_volume_read_only() -> None:
    job = _job()
    deployment = tensorboard.deployment(job, _spec(job))
    assert deployment["metadata"]["name"] == "mnist-tensorboard"
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"][tensorboard.LABEL_TENSORBOARD_OF] == "mnist"
    assert spec_lib.LABEL_JOB_NAME not in pod["metadata"]["labels"], "the reconcile would count it as a replica"
    board = pod["spec"]["containers"][0]
    assert board["image"] == container()["image"]
    assert board["command"] == ["tensorboard", "--logdir", "/logs/mnist", "--host", "0.0.0.0", "--port", "6006"]
    assert {"name": "logs", "mountPath": "/logs", "readOnly": True} in board["volumeMounts"]
    assert CLAIM in pod["spec"]["volumes"]
    assert pod["spec"]["securityContext"]["fsGroup"] == 10001, "the template's pod security context is kept"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert board["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert board["resources"] == dict(tensorboard.DEFAULT_RESOURCES)


def test_the_chiefs_template_is_used_when_there_is_one_and_the_deepest_mount_wins() -> None:
    job = _job()
    job["spec"]["replicaSpecs"]["Chief"] = {"replicas": 1, "template": {"spec": {
        "containers": [{**container(), "image": "chief:1",
                        "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                         {"name": "runs", "mountPath": "/data/runs", "subPath": "team"}]}],
        "volumes": [{"name": "data", "nfs": {"server": "nfs", "path": "/"}}, CLAIM | {"name": "runs"}]}}}
    job["spec"]["tensorboard"]["logDir"] = "/data/runs/mnist"
    volume, mount = tensorboard.log_volume(_spec(job))
    assert volume["name"] == "runs" and mount == {"name": "runs", "mountPath": "/data/runs", "subPath": "team",
                                                 "readOnly": True}
    assert tensorboard.deployment(job, _spec(job))["spec"]["template"]["spec"]["containers"][0]["image"] == "chief:1"


def test_image_and_resources_of_the_spec_win() -> None:
    job = _job(image="tensorboard:2.21", resources={"requests": {"cpu": "1"}})
    board = tensorboard.deployment(job, _spec(job))["spec"]["template"]["spec"]["containers"][0]
    assert board["image"] == "tensorboard:2.21" and board["resources"] == {"requests": {"cpu": "1"}}


@pytest.mark.parametrize("volumes, mounts, log_dir, error", [
    ([CLAIM], [{"name": "logs", "mountPath": "/logs"}], "/tmp/mnist", "'/tmp/mnist' is on no volume .* /logs"),
    ([CLAIM], [{"name": "logs", "mountPath": "/logs"}], "/logsx", "'/logsx' is on no volume"),
    ([{"name": "logs", "emptyDir": {}}], [{"name": "logs", "mountPath": "/logs"}], "/logs", "an emptyDir that only"),
    ([], [{"name": "logs", "mountPath": "/logs"}], "/logs", "'logs' names no volume"),
])
def test_a_log_directory_the_tensorboard_cannot_read_is_refused_naming_it(
        volumes: list[dict[str, Any]], mounts: list[dict[str, Any]], log_dir: str, error: str) -> None:
    job = _job(log_dir, volumes, mounts)
    with pytest.raises(ValueError, match=error):
        tensorboard.job_objects(job, _spec(job), with_network_policy=True)


@pytest.mark.parametrize("board, error", [
    ({"enabled": True}, "logDir is required"),
    ({"enabled": True, "logDir": "logs"}, "'logs' is not an absolute path"),
    ({"enabled": "yes", "logDir": "/logs"}, "'yes' is not a boolean"),
    ({"enabled": True, "logDir": "/logs", "resources": {"cpu": 1}}, "is not a container's resources"),
])
def test_a_bad_spec_is_refused_naming_the_field(board: dict[str, Any], error: str) -> None:
    job = make_job(workers=1)
    with pytest.raises(ValueError, match=error):
        spec_lib.parse_spec({**job["spec"], "tensorboard": board})


def test_service_and_network_policy_open_port_6006_only_and_nothing_without_the_field() -> None:
    job = _job()
    service = tensorboard.service(job)
    assert service["spec"]["selector"] == {tensorboard.LABEL_TENSORBOARD_OF: "mnist"}
    assert service["spec"]["ports"] == [{"name": "tensorboard", "port": 6006, "targetPort": "tensorboard",
                                         "protocol": "TCP"}]
    assert spec_lib.LABEL_JOB_NAME not in service["metadata"]["labels"], "the reconcile would delete it"
    policy = tensorboard.network_policy(job)
    assert policy["metadata"]["labels"][spec_lib.LABEL_JOB_NAME] == "mnist", "watched: made again when deleted"
    assert policy["spec"]["ingress"] == [{"ports": [{"port": "tensorboard", "protocol": "TCP"}]}]
    kinds = [o["kind"] for o in tensorboard.job_objects(job, _spec(job), with_network_policy=False)]
    assert kinds == ["Deployment", "Service"]
    assert tensorboard.job_objects(make_job(workers=1), _spec(make_job(workers=1)), True) == []


def test_a_name_too_long_for_the_service_is_refused() -> None:
    job = _job()
    job["metadata"]["name"] = "j" * 52
    with pytest.raises(ValueError, match="at most 51"):
        tensorboard.job_objects(job, _spec(job), with_network_policy=True)


class _Kube:
    def __init__(self) -> None:
        self.created: list[tuple[str, str]] = []

    def _record(self, obj: dict[str, Any]) -> bool:
        self.created.append((obj["kind"], obj["metadata"]["name"]))
        return True

    create_network_policy = create_pod_disruption_budget = create_deployment = create_service = _record


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _ensure(job: dict[str, Any], kube: Any, upkeep: owned_objects.Upkeep, said: list[tuple[str, str]]) -> None:
    asyncio.run(ensure_objects.job_objects(kube, _call, lambda kind, reason, _: said.append((kind, reason)),
                                           job, [], upkeep, jobobjects.JobObjectSettings()))


def test_ensure_objects_creates_the_tensorboard_once_and_says_why_it_cannot() -> None:
    kube, upkeep = _Kube(), owned_objects.Upkeep()
    said: list[tuple[str, str]] = []
    _ensure(_job(), kube, upkeep, said)
    assert set(kube.created) >= {("Deployment", "mnist-tensorboard"), ("Service", "mnist-tensorboard"),
                                 ("NetworkPolicy", "mnist-tensorboard")} and said == []
    before = len(kube.created)
    _ensure(_job(), kube, upkeep, said)
    assert len(kube.created) == before, "made once per operator run"
    broken, broken_upkeep = _job("/elsewhere"), owned_objects.Upkeep()
    _ensure(broken, kube, broken_upkeep, said)
    _ensure(broken, kube, broken_upkeep, said)
    assert said == [("Warning", "FailedCreateTensorBoard")], "said once, and the other objects still made"
    assert "/elsewhere" in broken_upkeep.last_error


def test_the_command_prints_or_runs_the_port_forward(capsys: pytest.CaptureFixture[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.open_tensorboard(["mnist", "-n", "team", "--print"], out, err) == 0
    assert out.getvalue() == "kubectl port-forward --namespace team service/mnist-tensorboard 6006:6006\n"
    assert cli.open_tensorboard(["mnist", "--port", "0"], out, err) == 2 and "--port 0" in err.getvalue()
