"""What a PS's standby needs to become the PS, without a cluster: the PS's TF_CONFIG, ports and
replication variables in its container, the take-over annotation as a file, a certificate naming the
PS too, and the one metadata patch that makes its pod the PS's."""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography import x509

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import job_certificates
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import ps_standby

PS0 = spec_lib.ReplicaKey(spec_lib.ReplicaType.PS, 0)


def _job() -> dict[str, Any]:
    job = make_job("click", "team", ps=1, workers=2)
    job["spec"]["replicaSpecs"]["PS"]["replication"] = {"enabled": True, "standby": True, "maxLagSeconds": 2}
    return job


def _pod_template(job: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = ps_standby.deployment(job, spec_lib.parse_spec(job["spec"]), 0, "t")["spec"]["template"]
    return template


def test_the_standby_has_what_the_ps_pod_has_to_serve_as_it() -> None:
    job = _job()
    job_spec = spec_lib.parse_spec(job["spec"])
    container = _pod_template(job)["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    ps_env = {e["name"]: e.get("value") for e in manifests.build_pod(job, job_spec, PS0)["spec"]["containers"][0]["env"]}
    assert json.loads(env["TF_CONFIG"]) == json.loads(str(ps_env["TF_CONFIG"]))  # the PS's cluster and task
    for name in ("TENSORGRID_DATA_PORT", "TENSORGRID_METRICS_PORT", "TENSORGRID_PS_REPLICATION",
                 "TENSORGRID_PS_REPLICA_MAX_LAG_S", "TENSORGRID_PS_REPLICA_ADDRESS"):
        assert env[name] == ps_env[name], name
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"tensorgrid": 2222, "tensorgrid-data": 2223, "metrics": 9090}


def test_the_take_over_annotation_reaches_the_standby_as_the_file_it_watches() -> None:
    pod = _pod_template(_job())
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == ps_standby.TAKE_OVER_VOLUME)
    item = volume["downwardAPI"]["items"][0]
    assert item["fieldRef"]["fieldPath"] == "metadata.annotations['tensorgrid.io/take-over']"
    container = pod["spec"]["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == ps_standby.TAKE_OVER_VOLUME)
    path = container["command"][container["command"].index("--take-over-file") + 1]
    assert path == f"{mount['mountPath']}/{item['path']}"


def test_the_takeover_patch_makes_the_ps_service_select_the_standby_and_its_replicaset_let_it_go() -> None:
    job = _job()
    job_spec = spec_lib.parse_spec(job["spec"])
    labels = dict(_pod_template(job)["metadata"]["labels"])
    patch = ps_standby.takeover_patch(job, job_spec, 0, epoch=3)["metadata"]
    merged = {k: v for k, v in {**labels, **patch["labels"]}.items() if v is not None}
    selector = manifests.build_service(job, job_spec, PS0)["spec"]["selector"]
    assert selector.items() <= merged.items()
    standby_selector = ps_standby.service(job, 0)["spec"]["selector"]
    assert not standby_selector.items() <= merged.items()  # the standby's Service (and ReplicaSet) drop it
    assert merged[spec_lib.LABEL_RESTART_EPOCH] == "3"
    assert patch["ownerReferences"] == [{"$patch": "replace"}, manifests.owner_reference(job)]
    assert patch["annotations"] == {"tensorgrid.io/take-over": "/job:ps/replica:0/task:0"}


def test_the_standbys_certificate_names_its_ps_too() -> None:
    job = _job()
    secret = job_certificates.replica_secret(job, job_certificates.new_authority(job), "click-ps-0-standby",
                                             ["click-ps-0"])
    certificate = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    assert {"click-ps-0-standby.team.svc", "click-ps-0.team.svc", "click-ps-0"} <= set(names)
    assert len(names) == len(set(names))
    made = cert_manager.replica_certificate(job, "click-ps-0-standby", cert_manager.CertManagerSettings(
        issuer=cert_manager.CERT_MANAGER), ["click-ps-0"])
    assert {"click-ps-0-standby.team.svc", "click-ps-0.team.svc"} <= set(made["spec"]["dnsNames"])
