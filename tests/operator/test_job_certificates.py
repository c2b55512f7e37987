"""Each TrainingJob gets its own CA and certificate in a Secret it owns, mounted into its pods,
made once (a restarted pod finds the same one) and good for every name its peers dial."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
from typing import Any

from cryptography import x509

from operator_cluster import Namespace, Operator, job_manifest, wait_for
from operator_sim import make_job
from tensorgrid_operator import job_certificates
from tensorgrid_operator import manifests
from tensorgrid_operator import spec as spec_lib

RT = spec_lib.ReplicaType


def _certificates(secret: dict[str, Any]) -> tuple[x509.Certificate, x509.Certificate]:
    data = {name: base64.b64decode(value) for name, value in secret["data"].items()}
    assert set(data) == {"ca.crt", "tls.crt", "tls.key"}, "the CA's key must not be stored"
    return x509.load_pem_x509_certificate(data["ca.crt"]), x509.load_pem_x509_certificate(data["tls.crt"])


def test_the_certificate_is_signed_by_the_job_ca_and_names_every_address_of_tf_config() -> None:
    job = make_job(ps=2, workers=3)
    job_spec = spec_lib.parse_spec(job["spec"])
    secret = job_certificates.build_secret(job, job_spec)
    ca, certificate = _certificates(secret)
    certificate.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = set(names.get_values_for_type(x509.DNSName))
    for addresses in manifests.cluster_spec("mnist", "team", job_spec).values():
        for address in addresses:
            assert address.rsplit(":", 1)[0] in dns, address
    assert {"localhost", "mnist-ps-1", "mnist-ps-1.team.svc.cluster.local", "*.team.svc"} <= dns
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert certificate.not_valid_after_utc > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(300)
    assert ca.not_valid_after_utc == certificate.not_valid_after_utc
    assert secret["metadata"]["annotations"] == {
        "tensorgrid.io/certificates-not-after": f"{certificate.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"}
    assert secret["metadata"]["ownerReferences"] == [manifests.owner_reference(job)]
    assert secret["metadata"]["name"] == "mnist-tls" and secret["type"] == "kubernetes.io/tls"


def test_the_longest_names_kubernetes_allows_fit() -> None:
    """A namespace and a job name of 63 characters (common names hold at most 64)."""
    job = make_job(name="j" * 50, namespace="n" * 63, ps=1, workers=1)
    _, certificate = _certificates(job_certificates.build_secret(job, spec_lib.parse_spec(job["spec"])))
    dns = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{'j' * 50}-worker-0.{'n' * 63}.svc" in dns.get_values_for_type(x509.DNSName)


def test_every_call_makes_a_new_ca() -> None:
    """So no two jobs trust each other (the reconcile makes one per job, once)."""
    job = make_job()
    job_spec = spec_lib.parse_spec(job["spec"])
    first, second = (job_certificates.build_secret(job, job_spec) for _ in range(2))
    assert first["data"]["ca.crt"] != second["data"]["ca.crt"]


def test_the_main_container_mounts_the_secret_and_a_template_value_wins() -> None:
    job = make_job(ps=1, workers=1)
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.WORKER, 0))
    main = pod["spec"]["containers"][0]
    assert {"name": "tensorgrid-tls", "secret": {"secretName": "mnist-tls"}} in pod["spec"]["volumes"]
    assert {"name": "tensorgrid-tls", "mountPath": manifests.TLS_MOUNT_PATH, "readOnly": True} in main["volumeMounts"]
    assert {"name": "TENSORGRID_TLS_DIR", "value": manifests.TLS_MOUNT_PATH} in main["env"]

    template = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    template["env"] = [{"name": "TENSORGRID_TLS_DIR", "value": "/etc/own-certs"}]
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.WORKER, 0))
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["TENSORGRID_TLS_DIR"] == "/etc/own-certs"


def _secret(namespace: Namespace, name: str) -> dict[str, Any]:
    secret: dict[str, Any] = json.loads(namespace.cp.kubectl(
        "-n", namespace.name, "get", "secret", name, "-o", "json").stdout)
    return secret


def test_the_operator_creates_the_secret_once_and_mounts_it(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("secure", ps=1, workers=2, policy="OnFailure"))
    pods = namespace.wait_pods("secure", {"secure-ps-0", "secure-worker-0", "secure-worker-1"})
    job = namespace.job("secure")
    assert job is not None
    secret = _secret(namespace, "secure-tls")
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainingJob", job["metadata"]["uid"], True)
    ca, certificate = _certificates(secret)
    certificate.verify_directly_issued_by(ca)
    dns = set(certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
              .get_values_for_type(x509.DNSName))
    assert f"secure-worker-1.{namespace.name}.svc" in dns
    for pod in pods.values():
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["tensorgrid-tls"]["secret"]["secretName"] == "secure-tls"
        main = pod["spec"]["containers"][0]
        assert any(m["name"] == "tensorgrid-tls" and m["readOnly"] for m in main["volumeMounts"])
        assert {"name": "TENSORGRID_TLS_DIR", "value": manifests.TLS_MOUNT_PATH} in main["env"]

    # A failed worker is replaced: the new pod mounts the same Secret, which is not made again.
    namespace.run_all("secure")
    namespace.wait_state("secure", "Running")
    old_uid = pods["secure-worker-1"]["metadata"]["uid"]
    namespace.set_phase("secure-worker-1", "Failed", 1)
    wait_for(lambda: namespace.pods("secure").get("secure-worker-1", {}).get("metadata", {}).get("uid")
             not in (None, old_uid), 20, "worker-1 recreated")
    again = _secret(namespace, "secure-tls")
    assert again["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]
    assert again["data"] == secret["data"]


def test_a_foreign_secret_of_that_name_stops_the_pods_with_a_warning(operator: Operator,
                                                                     namespace: Namespace) -> None:
    namespace.cp.core.create_namespaced_secret(namespace.name, {
        "metadata": {"name": "taken-tls"}, "stringData": {"note": "someone else's"}})
    namespace.apply(job_manifest("taken", ps=1, workers=1))
    wait_for(lambda: any(e["reason"] == "FailedCreateSecret" and "taken-tls" in e["message"]
                         for e in namespace.events("taken")), 20, "the FailedCreateSecret warning",
             lambda: namespace.events("taken"))
    assert namespace.pods("taken") == {}
    namespace.cp.core.delete_namespaced_secret("taken-tls", namespace.name)
    namespace.wait_pods("taken", {"taken-ps-0", "taken-worker-0"}, timeout=60)
    assert _certificates(_secret(namespace, "taken-tls"))
