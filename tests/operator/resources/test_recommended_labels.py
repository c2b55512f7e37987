"""Kubernetes' recommended labels (app.kubernetes.io/*) on the pods and Services the operator makes.

What a platform's tools group by (dashboards, cost reports, policy engines): every replica's pod and
Service says it runs tensorgrid, for which job, in which role, made by tensorgrid-operator; so do
a job's TensorBoard and PS standbys. A template's own app.kubernetes.io values win on its pods, the
tensorgrid.io labels still win over the template's, and no selector uses the new labels (a Service or
Deployment made by an older operator keeps selecting its pods).
"""

from __future__ import annotations

from typing import Any

import pytest

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import ps_standby
from tensorgrid_operator.resources import tensorboard

RT = spec_lib.ReplicaType
RECOMMENDED = ("name", "instance", "component", "part-of", "managed-by")


def _recommended(labels: dict[str, str]) -> dict[str, str]:
    return {key: labels[f"app.kubernetes.io/{key}"] for key in RECOMMENDED if f"app.kubernetes.io/{key}" in labels}


def _expected(job: str, component: str, name: str = "tensorgrid") -> dict[str, str]:
    return {"name": name, "instance": job, "component": component, "part-of": "tensorgrid",
            "managed-by": "tensorgrid-operator"}


@pytest.mark.parametrize(("rtype", "component"), [(RT.CHIEF, "chief"), (RT.PS, "ps"), (RT.WORKER, "worker"),
                                                  (RT.EVALUATOR, "evaluator")])
def test_each_replicas_pod_and_service_carry_the_recommended_labels(rtype: RT, component: str) -> None:
    job = make_job("mnist", ps=1, workers=2, chief=1, evaluators=1)
    job_spec = spec_lib.parse_spec(job["spec"])
    key = spec_lib.ReplicaKey(rtype, 0)
    pod = manifests.build_pod(job, job_spec, key)
    service = manifests.build_service(job, job_spec, key)
    assert _recommended(pod["metadata"]["labels"]) == _expected("mnist", component)
    assert _recommended(service["metadata"]["labels"]) == _expected("mnist", component)
    assert pod["metadata"]["labels"][spec_lib.LABEL_JOB_NAME] == "mnist"
    assert not any(k.startswith("app.kubernetes.io/") for k in service["spec"]["selector"])
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


def test_a_templates_own_recommended_labels_win_but_not_over_tensorgrids() -> None:
    job = make_job("ranker", workers=1)
    template_meta: dict[str, Any] = job["spec"]["replicaSpecs"]["Worker"]["template"].setdefault("metadata", {})
    template_meta["labels"] = {"app.kubernetes.io/part-of": "recommender", "app.kubernetes.io/name": "ranker-train",
                               spec_lib.LABEL_JOB_NAME: "someone-else", "team": "search"}
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.WORKER, 0))
    labels = pod["metadata"]["labels"]
    assert _recommended(labels) == {**_expected("ranker", "worker"), "name": "ranker-train", "part-of": "recommender"}
    assert labels[spec_lib.LABEL_JOB_NAME] == "ranker" and labels["team"] == "search"


def test_tensorboard_and_ps_standby_objects_carry_them_outside_their_selectors() -> None:
    job = make_job("click", ps=1, workers=1)
    worker = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    worker["containers"][0]["volumeMounts"] = [{"name": "logs", "mountPath": "/logs"}]
    worker["volumes"] = [{"name": "logs", "persistentVolumeClaim": {"claimName": "click-logs"}}]
    job["spec"]["tensorboard"] = {"enabled": True, "logDir": "/logs/click"}
    job["spec"]["replicaSpecs"]["PS"]["replication"] = {"enabled": True, "standby": True}
    job_spec = spec_lib.parse_spec(job["spec"])
    board = tensorboard.deployment(job, job_spec)
    standby = {o["kind"]: o for o in ps_standby.job_objects(job, job_spec, True)}
    for deployment, expected in ((board, _expected("click", "tensorboard", name="tensorboard")),
                                 (standby["Deployment"], _expected("click", "ps-standby"))):
        assert _recommended(deployment["metadata"]["labels"]) == expected
        assert _recommended(deployment["spec"]["template"]["metadata"]["labels"]) == expected
        assert not any(k.startswith("app.kubernetes.io/") for k in deployment["spec"]["selector"]["matchLabels"])
    for service in (tensorboard.service(job), standby["Service"]):
        assert _recommended(service["metadata"]["labels"])["managed-by"] == "tensorgrid-operator"
        assert not any(k.startswith("app.kubernetes.io/") for k in service["spec"]["selector"])
