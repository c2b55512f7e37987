"""spec.replicaSpecs.PS.replication without a cluster: the field's validation, the runtime's environment on
the PS pods, and the standby's Deployment, Service and NetworkPolicy."""

from __future__ import annotations

from typing import Any

import pytest

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import ps_standby

RT = spec_lib.ReplicaType


def _job(ps: int, replication: Any, workers: int = 1) -> dict[str, Any]:
    job = make_job("click", "team", ps=ps, workers=workers)
    if replication is not None:
        job["spec"]["replicaSpecs"]["PS"]["replication"] = replication
    return job


def _env(job: dict[str, Any], rtype: RT, index: int) -> dict[str, str]:
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(rtype, index))
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


def test_replication_is_off_unless_asked_and_no_ps_gets_its_variables() -> None:
    job = _job(2, None)
    assert not spec_lib.parse_spec(job["spec"]).ps_replication.enabled
    assert not any(name.startswith("TENSORGRID_PS_REPLICA") for name in _env(job, RT.PS, 0))


def test_a_ring_of_ps_gets_replication_on_and_its_lag_bound_but_no_address() -> None:
    job = _job(2, {"enabled": True, "maxLagSeconds": 0.5})
    for index in (0, 1):
        env = _env(job, RT.PS, index)
        assert env["TENSORGRID_PS_REPLICATION"] == "1"
        assert env["TENSORGRID_PS_REPLICA_MAX_LAG_S"] == "0.5"
        assert "TENSORGRID_PS_REPLICA_ADDRESS" not in env  # the runtime finds the next PS in TF_CONFIG
    assert "TENSORGRID_PS_REPLICATION" not in _env(job, RT.WORKER, 0)
    assert ps_standby.job_objects(job, spec_lib.parse_spec(job["spec"]), True) == []


def test_a_standby_ps_gets_its_standbys_service_address() -> None:
    job = _job(1, {"enabled": True, "standby": True})
    env = _env(job, RT.PS, 0)
    assert env["TENSORGRID_PS_REPLICA_ADDRESS"] == "click-ps-0-standby.team.svc:2222"
    assert env["TENSORGRID_PS_REPLICA_MAX_LAG_S"] == "1"


def test_the_standby_runs_the_ps_image_with_its_own_certificate_away_from_its_ps() -> None:
    job = _job(1, {"enabled": True, "standby": True})
    ps_container = job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]
    ps_container["resources"] = {"limits": {"memory": "4Gi"}}
    ps_container["readinessProbe"] = {"tcpSocket": {"port": 9090}}
    objects = {o["kind"]: o for o in ps_standby.job_objects(job, spec_lib.parse_spec(job["spec"]), True)}
    assert set(objects) == {"Deployment", "Service", "NetworkPolicy"}
    assert {o["metadata"]["name"] for o in objects.values()} == {"click-ps-0-standby"}
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"] for o in objects.values())
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]
    assert spec_lib.LABEL_JOB_NAME not in pod["metadata"]["labels"]  # not counted as a replica
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["tensorgrid", "ps-standby", "--address", "click-ps-0-standby.team.svc:2222",
                                    "--take-over-file", "/etc/tensorgrid/take-over/task"]
    assert container["image"] == ps_container["image"] and container["resources"] == ps_container["resources"]
    assert "readinessProbe" not in container  # the PS's probes ask for ports a standby does not serve
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TENSORGRID_PS_STANDBY_FOR"] == "/job:ps/replica:0/task:0"
    assert env["TENSORGRID_TLS_DIR"] == manifests.TLS_MOUNT_PATH
    assert pod["spec"]["volumes"][0] == {"name": manifests.TLS_VOLUME, "secret": {"secretName": "click-ps-0-standby-tls"}}
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    term = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"][spec_lib.LABEL_JOB_NAME] == "click"
    service = objects["Service"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    policy = objects["NetworkPolicy"]["spec"]
    assert policy["ingress"][0]["from"] == [{"podSelector": {"matchLabels": {spec_lib.LABEL_JOB_NAME: "click"}}}]


def test_every_ps_of_a_standby_job_has_its_own_standby() -> None:
    job = _job(2, {"enabled": True, "standby": True})
    names = {o["metadata"]["name"] for o in ps_standby.job_objects(job, spec_lib.parse_spec(job["spec"]), False)}
    assert names == {"click-ps-0-standby", "click-ps-1-standby"}
    assert _env(job, RT.PS, 1)["TENSORGRID_PS_REPLICA_ADDRESS"] == "click-ps-1-standby.team.svc:2222"


@pytest.mark.parametrize("ps, replication, message", [
    (1, {"enabled": True}, "with one PS its replica needs a standby to live on: set standby: true"),
    (2, {"standby": True}, "standby: true holds a replica that enabled: false turns off"),
    (2, {"enabled": "yes"}, "spec.replicaSpecs.PS.replication.enabled: 'yes' is not a boolean"),
    (2, {"enabled": True, "maxLagSeconds": 0}, "maxLagSeconds: 0 is not a number of seconds greater than 0"),
    (2, {"enabled": True, "lag": 1}, "unknown field 'lag'; valid: enabled, standby, maxLagSeconds"),
    (0, {"enabled": True, "standby": True}, "the job has no PS replicas"),
    (2, "on", "'on' is not an object"),
])
def test_bad_replication_is_refused_naming_the_value(ps: int, replication: Any, message: str) -> None:
    job = _job(max(ps, 1), replication)
    job["spec"]["replicaSpecs"]["PS"]["replicas"] = ps
    with pytest.raises(ValueError, match="spec.replicaSpecs.PS.replication") as refused:
        spec_lib.parse_spec(job["spec"])
    assert message in str(refused.value)


def test_replication_on_another_replica_type_is_refused() -> None:
    job = _job(2, None)
    job["spec"]["replicaSpecs"]["Worker"]["replication"] = {"enabled": True}
    with pytest.raises(ValueError, match="spec.replicaSpecs.Worker.replication: only spec.replicaSpecs.PS"):
        spec_lib.parse_spec(job["spec"])


def test_a_standby_name_longer_than_a_dns_label_is_refused() -> None:
    job = _job(1, {"enabled": True, "standby": True})
    job["metadata"]["name"] = "j" * 52
    with pytest.raises(ValueError, match="longer than 63 characters"):
        ps_standby.job_objects(job, spec_lib.parse_spec(job["spec"]), False)
