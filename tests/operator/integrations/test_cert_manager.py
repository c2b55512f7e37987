"""cert-manager's mode, without a cluster: the objects a job gets, the settings refused with their reason,
what a job missing cert-manager is told, and which issuer each job keeps (one started by the operator
goes on with the operator's CA). tests/operator/integrations/test_cert_manager_controllers.py runs them against
cert-manager's real controllers."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, Optional

import pytest

from operator_sim import make_job
from tensorgrid_operator.cluster import certificate_secrets
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import job_certificates
from tensorgrid_operator.resources import manifests

PER_JOB = cert_manager.CertManagerSettings(cert_manager.CERT_MANAGER)
SHARED = cert_manager.CertManagerSettings(cert_manager.CERT_MANAGER,
                                          cert_manager.IssuerRef("ClusterIssuer", "tensorgrid-ca"))


def _by_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_a_job_gets_its_own_ca_chain_owned_by_it_in_order() -> None:
    job = make_job("mnist", ps=1, workers=2)
    objects = cert_manager.job_objects(job, PER_JOB)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Issuer", "mnist-selfsigned"), ("Certificate", "mnist-ca"), ("Issuer", "mnist-ca")]
    for obj in objects:
        assert obj["apiVersion"] == "cert-manager.io/v1" and obj["metadata"]["namespace"] == "team"
        assert obj["metadata"]["ownerReferences"] == [manifests.owner_reference(job)]
        assert obj["metadata"]["labels"] == {"tensorgrid.io/job-name": "mnist"}
    found = _by_name(objects)
    assert found["Issuer", "mnist-selfsigned"]["spec"] == {"selfSigned": {}}
    ca = found["Certificate", "mnist-ca"]["spec"]
    assert ca["isCA"] is True and ca["secretName"] == job_certificates.ca_secret_name("mnist")
    assert ca["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "mnist-selfsigned"}
    assert ca["privateKey"] == {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8", "rotationPolicy": "Never"}
    assert ca["duration"] == "87600h" and len(ca["commonName"]) <= 64
    assert found["Issuer", "mnist-ca"]["spec"] == {"ca": {"secretName": "mnist-ca"}}
    assert cert_manager.job_objects(job, SHARED) == [], "an issuer of the chart's: nothing per job"
    assert cert_manager.job_objects(job, cert_manager.CertManagerSettings()) == []


@pytest.mark.parametrize("settings, issuer", [
    (PER_JOB, {"group": "cert-manager.io", "kind": "Issuer", "name": "mnist-ca"}),
    (SHARED, {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "tensorgrid-ca"}),
])
def test_a_replica_certificate_names_what_the_operator_s_own_names(settings: cert_manager.CertManagerSettings,
                                                                   issuer: dict[str, str]) -> None:
    job = make_job("mnist", ps=1, workers=2)
    certificate = cert_manager.replica_certificate(job, "mnist-worker-1", settings)
    assert certificate["kind"] == "Certificate" and certificate["metadata"]["name"] == "mnist-worker-1-tls"
    assert certificate["metadata"]["ownerReferences"] == [manifests.owner_reference(job)]
    spec = certificate["spec"]
    assert spec["secretName"] == manifests.replica_tls_secret_name("mnist-worker-1")  # what the pod mounts
    assert spec["dnsNames"] == job_certificates.replica_dns_names("mnist-worker-1", "team") == [
        "mnist-worker-1", "mnist-worker-1.team", "mnist-worker-1.team.svc", "mnist-worker-1.team.svc.cluster.local",
        "localhost"]
    assert spec["ipAddresses"] == ["127.0.0.1", "::1"]
    assert set(spec["usages"]) == {"digital signature", "server auth", "client auth"}
    assert spec["privateKey"]["algorithm"] == "ECDSA" and spec["privateKey"]["size"] == 256
    assert (spec["duration"], spec["renewBefore"]) == (settings.duration, settings.renew_before)
    assert spec["issuerRef"] == issuer
    assert spec["secretTemplate"] == {"labels": {"tensorgrid.io/job-name": "mnist"}}


@pytest.mark.parametrize("kwargs, message", [
    ({"issuer": "vault"}, "certificate issuer 'vault' is not one of operator, cert-manager"),
    ({"issuer_ref": cert_manager.IssuerRef("Issuer", "x")}, "needs the certificate issuer cert-manager, not operator"),
    ({"issuer": "cert-manager", "duration": "90d"}, "certificate duration '90d' is not a duration"),
    ({"issuer": "cert-manager", "duration": ""}, "certificate duration '' is not a duration"),
    ({"issuer": "cert-manager", "duration": "30m", "renew_before": "10m"}, "must be at least 1h"),
    ({"issuer": "cert-manager", "renew_before": "2160h"}, "renewBefore 2160h must be more than 0 and less than"),
    ({"issuer": "cert-manager", "renew_before": "0s"}, "renewBefore 0s must be more than 0"),
    ({"issuer": "cert-manager", "ca_duration": "720h"}, "CA duration 720h is shorter than the certificate duration"),
])
def test_bad_settings_are_refused_with_the_bad_value(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cert_manager.CertManagerSettings(**kwargs)


def test_durations_and_issuers_parse_as_cert_manager_writes_them() -> None:
    assert cert_manager.parse_duration("2160h", "d") == 2160 * 3600
    assert cert_manager.parse_duration("1h30m", "d") == 5400
    assert cert_manager.parse_duration("90s", "d") == 90
    assert cert_manager.IssuerRef.parse("ClusterIssuer/tensorgrid-ca") == cert_manager.IssuerRef(
        "ClusterIssuer", "tensorgrid-ca")
    for bad, message in (("tensorgrid-ca", "is not <kind>/<name>"), ("Vault/x", "kind 'Vault' is not one of"),
                         ("Issuer/", "needs a name")):
        with pytest.raises(ValueError, match=message):
            cert_manager.IssuerRef.parse(bad)
    # A shared issuer may sign for longer than a per-job CA would last: its own CA is not ours to check.
    assert cert_manager.CertManagerSettings("cert-manager", cert_manager.IssuerRef("Issuer", "x"),
                                            ca_duration="1h").per_job_ca is False


@pytest.mark.parametrize("served, names", [
    (None, "certificates.cert-manager.io, issuers.cert-manager.io"),
    ({"issuers", "issuers/status"}, "certificates.cert-manager.io"),
    ({"certificates"}, "issuers.cert-manager.io"),
])
def test_a_job_missing_cert_manager_is_told_what_is_missing(served: Optional[set[str]], names: str) -> None:
    text = cert_manager.missing_message("Issuer mnist-selfsigned", served)
    assert f"does not serve {names} (cert-manager.io/v1)" in text
    assert "could not create Issuer mnist-selfsigned" in text and "set certificates.issuer to operator" in text


class _Secrets:
    """The Secrets a pass reads (kube.Kube's get_secret and nothing else: the test fails on any other call)."""

    def __init__(self, **secrets: dict[str, Any]) -> None:
        self.secrets = secrets
        self.read: list[str] = []

    def get_secret(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        self.read.append(name)
        return self.secrets.get(name.replace("-", "_"))


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _operator_ca(job: dict[str, Any]) -> dict[str, Any]:
    return job_certificates.authority_secret(job, job_certificates.new_authority(job))


def _cert_managers_ca(job: dict[str, Any]) -> dict[str, Any]:
    """What cert-manager writes for the job's CA Certificate: its annotations, no ``ca.key``, no owner."""
    pem = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
    return {"metadata": {"name": "mnist-ca", "annotations": {cert_manager.CERTIFICATE_NAME_ANNOTATION: "mnist-ca"}},
            "data": {"ca.crt": pem, "tls.crt": pem, "tls.key": pem}}


@pytest.mark.parametrize("settings, first_pods, existing, expected", [
    # cert-manager's mode: a new job calls nothing and gets its issuer.
    (PER_JOB, True, None, "issuer"),
    (SHARED, True, None, "issuer"),
    # A later pass of a cert-manager job (its CA Secret cert-manager's, or not issued yet).
    (PER_JOB, False, "cert-manager", "issuer"),
    (PER_JOB, False, None, "issuer"),
    # A job the operator started keeps the operator's CA in cert-manager's mode.
    (PER_JOB, False, "operator", "authority"),
    (SHARED, False, "operator", "authority"),
    # The operator's mode: a job cert-manager started keeps its Secrets; a new job gets a CA.
    (cert_manager.CertManagerSettings(), False, "cert-manager", "issued_before"),
    (cert_manager.CertManagerSettings(), False, "operator", "authority"),
])
def test_each_job_keeps_the_issuer_it_started_with(settings: cert_manager.CertManagerSettings, first_pods: bool,
                                                   existing: Optional[str], expected: str) -> None:
    job = make_job("mnist", ps=1, workers=1)
    secrets = {"operator": {"mnist_ca": _operator_ca(job)}, "cert-manager": {"mnist_ca": _cert_managers_ca(job)},
               None: {}}[existing]
    kube = _Secrets(**secrets)
    said: list[tuple[str, str, str]] = []
    got = asyncio.run(certificate_secrets.for_job(kube, _call, lambda *e: said.append(e), job,  # type: ignore[arg-type]
                                                  first_pods, settings))
    assert not said
    if expected == "issuer":
        assert got.issuer == settings.replica_issuer("mnist") and got.authority is None
        assert kube.read == ([] if first_pods else ["mnist-ca", "mnist-tls"][:1 if existing else 2])
    elif expected == "authority":
        assert got.authority is not None and got.issuer is None
    else:
        assert got.issued_before and got.authority is None and got.issuer is None and not got.job_wide
