"""Each TrainingJob gets its own CA, kept in a Secret no pod mounts, and each replica a certificate
naming only itself, in a Secret only its pod mounts: made once (a restarted pod shows the same
one), signed by the same CA when made later (a creation retried, a Secret deleted), and no
replica can pose as another. Jobs of an earlier operator (one certificate for every replica)
keep theirs."""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import pathlib
import socket
import ssl
import threading
import uuid
from typing import Any, Iterator

import pytest
from cryptography import x509
from kubernetes.client import exceptions

from kube_controlplane import ControlPlane
from operator_cluster import Namespace, created_namespace, Operator, job_manifest, operator_settings, running_operator, wait_for
from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import job_certificates
from tensorgrid_operator.resources import manifests

RT = spec_lib.ReplicaType


def _files(secret: dict[str, Any]) -> dict[str, bytes]:
    return {name: base64.b64decode(value) for name, value in secret["data"].items()}


def _certificate(secret: dict[str, Any], file: str = "tls.crt") -> x509.Certificate:
    return x509.load_pem_x509_certificate(_files(secret)[file])


def _names(certificate: x509.Certificate) -> tuple[set[str], set[str]]:
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(names.get_values_for_type(x509.DNSName)), {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}


def _own_names(pod: str, namespace: str) -> set[str]:
    return {pod, f"{pod}.{namespace}", f"{pod}.{namespace}.svc", f"{pod}.{namespace}.svc.cluster.local", "localhost"}


def test_a_replica_certificate_names_only_its_replica_and_is_signed_by_the_job_ca() -> None:
    job = make_job(ps=2, workers=3)
    authority = job_certificates.new_authority(job)
    ca_secret = job_certificates.authority_secret(job, authority)
    secret = job_certificates.replica_secret(job, authority, "mnist-worker-1")
    assert set(_files(secret)) == {"ca.crt", "tls.crt", "tls.key"}, "a replica gets no CA key"
    assert _files(secret)["ca.crt"] == _files(ca_secret)["ca.crt"]
    ca, certificate = _certificate(ca_secret, "ca.crt"), _certificate(secret)
    certificate.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    dns, ips = _names(certificate)
    assert dns == _own_names("mnist-worker-1", "team") and ips == {"127.0.0.1", "::1"}
    # TF_CONFIG dials this replica by a name the certificate carries, and no other replica's.
    worker_1 = manifests.cluster_spec("mnist", "team", spec_lib.parse_spec(job["spec"]))["worker"][1]
    assert worker_1.rsplit(":", 1)[0] in dns
    assert certificate.not_valid_after_utc == ca.not_valid_after_utc
    assert ca.not_valid_after_utc > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(300)
    for made, name, kind in ((secret, "mnist-worker-1-tls", "kubernetes.io/tls"), (ca_secret, "mnist-ca", "Opaque")):
        assert made["metadata"]["name"] == name and made["type"] == kind
        assert made["metadata"]["ownerReferences"] == [manifests.owner_reference(job)]
        assert made["metadata"]["labels"] == {"tensorgrid.io/job-name": "mnist"}
        assert made["metadata"]["annotations"] == {
            "tensorgrid.io/certificates-not-after": f"{ca.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"}


def test_the_ca_read_back_from_its_secret_signs_as_before_and_a_damaged_one_is_named() -> None:
    job = make_job()
    authority = job_certificates.new_authority(job)
    secret = job_certificates.authority_secret(job, authority)
    again = job_certificates.read_authority(secret)
    assert again.certificate == authority.certificate
    _certificate(job_certificates.replica_secret(job, again, "mnist-ps-0")).verify_directly_issued_by(
        authority.certificate)

    other = job_certificates.authority_secret(job, job_certificates.new_authority(job))
    mixed = {**secret, "data": {**secret["data"], "ca.key": other["data"]["ca.key"]}}
    with pytest.raises(ValueError, match=r"secret mnist-ca: ca.key is not the key of the certificate in ca.crt"):
        job_certificates.read_authority(mixed)
    with pytest.raises(ValueError, match=r"secret mnist-ca does not hold a CA certificate and key in ca.crt and "
                                         r"ca.key .*'ca.key'"):
        job_certificates.read_authority({**secret, "data": {"ca.crt": secret["data"]["ca.crt"]}})
    with pytest.raises(ValueError, match=r"secret mnist-ca does not hold"):
        job_certificates.read_authority({**secret, "data": {**secret["data"], "ca.crt": "bm90IHBlbQ=="}})


def test_the_longest_names_kubernetes_allows_fit() -> None:
    """A namespace of 63 characters and a pod name of 63 (common names hold at most 64)."""
    job = make_job(name="j" * 50, namespace="n" * 63, ps=1, workers=1)
    pod = f"{'j' * 50}-worker-1999"
    assert len(pod) == spec_lib.MAX_NAME_LENGTH - 1
    dns, _ = _names(_certificate(job_certificates.replica_secret(job, job_certificates.new_authority(job), pod)))
    assert f"{pod}.{'n' * 63}.svc" in dns


def test_every_job_gets_a_new_ca() -> None:
    """So no two jobs trust each other (the operator makes one per job, once)."""
    job = make_job()
    assert job_certificates.new_authority(job).certificate_pem != job_certificates.new_authority(job).certificate_pem


def test_a_pod_mounts_its_replica_secret_and_a_template_value_wins() -> None:
    job = make_job(ps=1, workers=1)
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.WORKER, 0))
    main = pod["spec"]["containers"][0]
    assert [v for v in pod["spec"]["volumes"] if "secret" in v] == [
        {"name": "tensorgrid-tls", "secret": {"secretName": "mnist-worker-0-tls"}}]
    assert {"name": "tensorgrid-tls", "mountPath": manifests.TLS_MOUNT_PATH, "readOnly": True} in main["volumeMounts"]
    assert {"name": "TENSORGRID_TLS_DIR", "value": manifests.TLS_MOUNT_PATH} in main["env"]
    job_wide = manifests.with_job_wide_tls(pod, "mnist")
    assert [v for v in job_wide["spec"]["volumes"] if "secret" in v] == [
        {"name": "tensorgrid-tls", "secret": {"secretName": "mnist-tls"}}]
    assert job_wide["spec"]["containers"] == pod["spec"]["containers"]

    template = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    template["env"] = [{"name": "TENSORGRID_TLS_DIR", "value": "/etc/own-certs"}]
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(RT.WORKER, 0))
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["TENSORGRID_TLS_DIR"] == "/etc/own-certs"


@contextlib.contextmanager
def _tls_server(secret: dict[str, Any], directory: pathlib.Path) -> Iterator[int]:
    """A TLS server on loopback showing the certificate and key of ``secret``, asking for a client's
    certificate of the same CA, as a task does; yields its port."""
    for name, content in _files(secret).items():
        (directory / name).write_bytes(content)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    context.load_verify_locations(directory / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (OSError, ssl.SSLError):
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        thread.join(5)
        assert not thread.is_alive()


def _handshake(port: int, server_name: str, client: dict[str, Any], directory: pathlib.Path) -> None:
    """A client of the job (``client``'s certificate) dialing ``server_name``, checking it as the runtime does."""
    for name, content in _files(client).items():
        (directory / f"client-{name}").write_bytes(content)
    context = ssl.create_default_context(cafile=str(directory / "client-ca.crt"))
    context.load_cert_chain(directory / "client-tls.crt", directory / "client-tls.key")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with context.wrap_socket(sock, server_hostname=server_name) as tls:
            assert tls.recv(2) == b"ok"


def _assert_no_replica_poses_as_another(secrets: dict[str, dict[str, Any]], namespace: str,
                                        tmp: pathlib.Path) -> None:
    """Each replica's key serves its own Service names, and a handshake for another replica's name fails."""
    pods = sorted(secrets)
    for pod in pods:
        other = next(p for p in pods if p != pod)
        with _tls_server(secrets[pod], tmp / pod) as port:
            _handshake(port, f"{pod}.{namespace}.svc", secrets[other], tmp / pod)
            with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
                _handshake(port, f"{other}.{namespace}.svc", secrets[other], tmp / pod)


def test_no_replica_can_complete_a_handshake_as_another(tmp_path: pathlib.Path) -> None:
    job = make_job(ps=1, workers=2)
    authority = job_certificates.new_authority(job)
    pods = ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    for pod in pods:
        (tmp_path / pod).mkdir()
    _assert_no_replica_poses_as_another(
        {pod: job_certificates.replica_secret(job, authority, pod) for pod in pods}, "team", tmp_path)


def _secret(namespace: Namespace, name: str) -> dict[str, Any]:
    secret: dict[str, Any] = json.loads(namespace.cp.kubectl(
        "-n", namespace.name, "get", "secret", name, "-o", "json").stdout)
    return secret


def _secrets(namespace: Namespace, job: str) -> dict[str, dict[str, Any]]:
    items = namespace.cp.api.sanitize_for_serialization(namespace.cp.core.list_namespaced_secret(
        namespace.name, label_selector=f"tensorgrid.io/job-name={job}").items)
    return {s["metadata"]["name"]: s for s in items}


def _secret_volumes(pod: dict[str, Any]) -> list[str]:
    return [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]


@pytest.mark.controlplane
def test_each_pod_mounts_only_its_own_certificate_made_once(operator: Operator, namespace: Namespace,
                                                            tmp_path: pathlib.Path) -> None:
    namespace.apply(job_manifest("secure", ps=1, workers=2, policy="OnFailure"))
    pods = namespace.wait_pods("secure", {"secure-ps-0", "secure-worker-0", "secure-worker-1"})
    job = namespace.job("secure")
    assert job is not None
    secrets = _secrets(namespace, "secure")
    assert set(secrets) == {"secure-ca", *(f"{pod}-tls" for pod in pods)}
    ca = _certificate(secrets["secure-ca"], "ca.crt")
    job_certificates.read_authority(secrets["secure-ca"])  # the key is kept, and is the CA's
    for name, pod in pods.items():
        assert _secret_volumes(pod) == [f"{name}-tls"], "a pod mounts its own Secret, and no other"
        main = pod["spec"]["containers"][0]
        assert any(m["name"] == "tensorgrid-tls" and m["readOnly"] for m in main["volumeMounts"])
        assert {"name": "TENSORGRID_TLS_DIR", "value": manifests.TLS_MOUNT_PATH} in main["env"]
        assert not pod["spec"]["automountServiceAccountToken"], "a pod cannot read the CA's Secret"
        secret = secrets[f"{name}-tls"]
        assert set(_files(secret)) == {"ca.crt", "tls.crt", "tls.key"}
        _certificate(secret).verify_directly_issued_by(ca)
        assert _names(_certificate(secret))[0] == _own_names(name, namespace.name)
        for held in (secret, secrets["secure-ca"]):
            owner = held["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainingJob", job["metadata"]["uid"], True)
    for pod in pods:
        (tmp_path / pod).mkdir()
    _assert_no_replica_poses_as_another({pod: secrets[f"{pod}-tls"] for pod in pods}, namespace.name, tmp_path)

    # A failed worker is replaced: the new pod mounts the same Secret, which is not made again.
    namespace.run_all("secure")
    namespace.wait_state("secure", "Running")
    old_uid = pods["secure-worker-1"]["metadata"]["uid"]
    namespace.set_phase("secure-worker-1", "Failed", 1)
    wait_for(lambda: namespace.pods("secure").get("secure-worker-1", {}).get("metadata", {}).get("uid")
             not in (None, old_uid), 20, "worker-1 recreated")
    assert _secret_volumes(namespace.pods("secure")["secure-worker-1"]) == ["secure-worker-1-tls"]
    again = _secrets(namespace, "secure")
    assert {name: s["metadata"]["resourceVersion"] for name, s in again.items()} == {
        name: s["metadata"]["resourceVersion"] for name, s in secrets.items()}

    # A replica whose Secret was deleted gets a new key and certificate of the same CA when its
    # pod is made again (the operator kept the CA's key).
    namespace.cp.core.delete_namespaced_secret("secure-worker-0-tls", namespace.name)
    wait_for(lambda: "secure-worker-0-tls" not in _secrets(namespace, "secure"), 20, "the Secret deleted")
    old_uid = namespace.pods("secure")["secure-worker-0"]["metadata"]["uid"]
    namespace.set_phase("secure-worker-0", "Failed", 1)
    wait_for(lambda: namespace.pods("secure").get("secure-worker-0", {}).get("metadata", {}).get("uid")
             not in (None, old_uid), 20, "worker-0 recreated")
    remade = _secret(namespace, "secure-worker-0-tls")
    _certificate(remade).verify_directly_issued_by(ca)
    assert _names(_certificate(remade))[0] == _own_names("secure-worker-0", namespace.name)
    assert _files(remade)["tls.key"] != _files(secrets["secure-worker-0-tls"])["tls.key"]


@pytest.mark.controlplane
def test_a_foreign_ca_secret_of_that_name_stops_the_pods_with_a_warning(operator: Operator,
                                                                        namespace: Namespace) -> None:
    namespace.cp.core.create_namespaced_secret(namespace.name, {
        "metadata": {"name": "taken-ca"}, "stringData": {"note": "someone else's"}})
    namespace.apply(job_manifest("taken", ps=1, workers=1))
    wait_for(lambda: any(e["reason"] == "FailedCreateSecret" and "taken-ca" in e["message"]
                         and "the job's CA" in e["message"] for e in namespace.events("taken")),
             20, "the FailedCreateSecret warning", lambda: namespace.events("taken"))
    assert namespace.pods("taken") == {}
    namespace.cp.core.delete_namespaced_secret("taken-ca", namespace.name)
    namespace.wait_pods("taken", {"taken-ps-0", "taken-worker-0"}, timeout=60)
    assert job_certificates.read_authority(_secret(namespace, "taken-ca"))


@pytest.mark.controlplane
def test_a_foreign_replica_secret_stops_only_that_pod_with_a_warning(operator: Operator,
                                                                     namespace: Namespace) -> None:
    namespace.cp.core.create_namespaced_secret(namespace.name, {
        "metadata": {"name": "held-worker-0-tls"}, "stringData": {"note": "someone else's"}})
    namespace.apply(job_manifest("held", ps=1, workers=2))
    namespace.wait_pods("held", {"held-ps-0", "held-worker-1"})
    wait_for(lambda: any(e["reason"] == "FailedCreateSecret" and "held-worker-0-tls" in e["message"]
                         and "replica held-worker-0's certificate" in e["message"] for e in namespace.events("held")),
             20, "the FailedCreateSecret warning", lambda: namespace.events("held"))
    assert "held-worker-0" not in namespace.pods("held")
    namespace.cp.core.delete_namespaced_secret("held-worker-0-tls", namespace.name)
    namespace.wait_pods("held", {"held-ps-0", "held-worker-0", "held-worker-1"}, timeout=60)
    job = namespace.job("held")
    made_later = _secret(namespace, "held-worker-0-tls")
    assert job is not None and job_certificates.owned_by(made_later, job)
    # Made in a later pass than its peers', by the same CA.
    _certificate(made_later).verify_directly_issued_by(_certificate(_secret(namespace, "held-ca"), "ca.crt"))


@pytest.fixture
def own_namespace(controlplane: ControlPlane) -> Iterator[Namespace]:
    """A namespace no running operator watches (the shared one watches tg-*)."""
    with created_namespace(controlplane, f"tgu-{uuid.uuid4().hex[:8]}") as namespace:
        yield namespace


@pytest.mark.controlplane
def test_a_job_of_an_earlier_operator_keeps_its_one_certificate(controlplane: ControlPlane,
                                                                own_namespace: Namespace) -> None:
    """An operator upgrade: the job's pods mount ``<job>-tls`` (one certificate for every replica, no CA
    key); the new operator makes no CA and no replica Secret for it, and its new pods mount ``<job>-tls``.
    (The earlier operator's Secret is imitated: its content is not read, only its owner.)"""
    namespace = own_namespace
    settings = operator_settings(controlplane, (namespace.name,))
    with running_operator(settings):
        namespace.apply(job_manifest("old", ps=1, workers=1, policy="OnFailure"))
        namespace.wait_pods("old", {"old-ps-0", "old-worker-0"})
        namespace.run_all("old")
        namespace.wait_state("old", "Running")
    # What an earlier operator left: <job>-tls owned by the job, and no <job>-ca nor <pod>-tls.
    job = namespace.job("old")
    assert job is not None
    secrets = _secrets(namespace, "old")
    for name in secrets:
        namespace.cp.core.delete_namespaced_secret(name, namespace.name)
    authority = job_certificates.new_authority(job)
    job_wide = job_certificates.replica_secret(job, authority, "old-worker-0")
    job_wide["metadata"]["name"] = "old-tls"
    namespace.cp.core.create_namespaced_secret(namespace.name, job_wide)
    wait_for(lambda: set(_secrets(namespace, "old")) == {"old-tls"}, 20, "the earlier operator's Secrets")

    with running_operator(settings):
        old_uid = namespace.pods("old")["old-worker-0"]["metadata"]["uid"]
        namespace.set_phase("old-worker-0", "Failed", 1)
        wait_for(lambda: namespace.pods("old").get("old-worker-0", {}).get("metadata", {}).get("uid")
                 not in (None, old_uid), 20, "worker-0 recreated")
        assert _secret_volumes(namespace.pods("old")["old-worker-0"]) == ["old-tls"]
        assert set(_secrets(namespace, "old")) == {"old-tls"}, "no CA and no replica Secret for a job-wide job"
    with pytest.raises(exceptions.ApiException) as missing:
        namespace.cp.core.read_namespaced_secret("old-ca", namespace.name)
    assert missing.value.status == 404
