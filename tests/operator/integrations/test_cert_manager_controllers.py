"""The operator's cert-manager mode against cert-manager's real controllers (cert_manager_controller.py).

Without cert-manager a job waits and says what is missing; once it is installed the job's pods
come. With it, each job gets a CA of its own as cert-manager objects owned by the job, and each
replica a Certificate whose Secret cert-manager issues: it names only that replica, verifies
against its job's CA, loads as a task's TLS directory, and only that replica's pod mounts it. Two
real tasks (``tensorgrid server``) train over mutual TLS with these certificates, and refuse a
certificate of another job's CA. Deleting the job garbage-collects every one of these objects.
With a ClusterIssuer of the chart's instead, every job's certificates share its CA.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import uuid
from typing import Any, Iterator

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

import cert_manager_controller
from kube_controlplane import ControlPlane
from operator_cluster import Namespace, created_namespace, free_port, job_manifest, operator_settings, running_operator, wait_for
from tensorgrid_operator.resources import cert_manager

pytestmark = [pytest.mark.controlplane, pytest.mark.third_party, pytest.mark.timeout(300)]
PER_JOB = cert_manager.CertManagerSettings(cert_manager.CERT_MANAGER)


@pytest.fixture(scope="module")
def cert_manager_running(controlplane: ControlPlane) -> Iterator[None]:
    with cert_manager_controller.running_cert_manager(controlplane):
        yield


@pytest.fixture
def own_namespace(controlplane: ControlPlane) -> Iterator[Namespace]:
    """A namespace the shared operator (``tg-*``, the operator's own certificates) does not watch."""
    with created_namespace(controlplane, f"tgcm-{uuid.uuid4().hex[:8]}") as namespace:
        yield namespace


def _settings(cp: ControlPlane, namespace: Namespace, certificates: cert_manager.CertManagerSettings) -> Any:
    return dataclasses.replace(operator_settings(cp, (namespace.name,)), certificates=certificates)


def _objects(namespace: Namespace, plural: str, job: str) -> dict[str, dict[str, Any]]:
    found = namespace.cp.custom.list_namespaced_custom_object(
        "cert-manager.io", "v1", namespace.name, plural, label_selector=f"tensorgrid.io/job-name={job}")
    return {o["metadata"]["name"]: o for o in found["items"]}


def _ready(certificate: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (certificate.get("status") or {}).get("conditions") or [])


def _wait_issued(namespace: Namespace, job: str, names: set[str]) -> dict[str, dict[str, Any]]:
    """The job's Certificates once all of ``names`` are Ready (cert-manager wrote their Secrets)."""
    found: dict[str, dict[str, Any]] = {}

    def issued() -> bool:
        nonlocal found
        found = _objects(namespace, "certificates", job)
        return set(found) == names and all(_ready(c) for c in found.values())

    wait_for(issued, 60, f"cert-manager to issue {sorted(names)}",
             lambda: {n: (c.get("status") or {}).get("conditions") for n, c in found.items()})
    return found


def _files(namespace: Namespace, secret: str) -> dict[str, bytes]:
    data = namespace.cp.core.read_namespaced_secret(secret, namespace.name).data
    return {name: base64.b64decode(value) for name, value in data.items()}


def _write(files: dict[str, bytes], directory: pathlib.Path) -> str:
    directory.mkdir(parents=True)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (directory / name).write_bytes(files[name])
    return str(directory)


def _names(certificate: x509.Certificate) -> tuple[list[str], list[str]]:
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return names.get_values_for_type(x509.DNSName), [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]


def test_without_cert_manager_a_job_waits_and_says_what_is_missing(controlplane: ControlPlane,
                                                                  own_namespace: Namespace,
                                                                  request: pytest.FixtureRequest) -> None:
    cp, namespace = controlplane, own_namespace
    cert_manager_controller.harness()  # skips here, before a cluster-wide change, when it was not built
    cert_manager_controller.remove_crds(cp)  # left by an interrupted run on a reused control plane
    with running_operator(_settings(cp, namespace, PER_JOB)):
        namespace.apply(job_manifest("early", ps=1, workers=1))
        missing = "does not serve certificates.cert-manager.io, issuers.cert-manager.io (cert-manager.io/v1)"
        wait_for(lambda: any(e["type"] == "Warning" and e["reason"] == "CertManagerMissing" and missing in e["message"]
                             for e in namespace.events("early")), 30, "the CertManagerMissing warning",
                 lambda: namespace.events("early"))
        # The event is posted as the condition is written.
        wait_for(lambda: namespace.condition("early", cert_manager.CONDITION).get("reason") == "CertManagerMissing",
                 30, "the CertificateIssuerCreated condition", lambda: namespace.status("early"))
        condition = namespace.condition("early", cert_manager.CONDITION)
        assert condition["status"] == "False", condition
        assert missing in condition["message"] and "set certificates.issuer to operator" in condition["message"]
        assert namespace.pods("early") == {}, "no pod before its certificate can be issued"
        # Once cert-manager is installed, the job goes on by itself: its objects, then its pods.
        request.getfixturevalue("cert_manager_running")
        namespace.wait_pods("early", {"early-ps-0", "early-worker-0"}, timeout=60)
        _wait_issued(namespace, "early", {"early-ca", "early-ps-0-tls", "early-worker-0-tls"})
        wait_for(lambda: namespace.condition("early", cert_manager.CONDITION).get("status") == "True", 30,
                 "the condition to say the issuer was created")


def _train_over_mutual_tls(target: str) -> Any:
    """Three SGD steps, the variable on the PS, the step on the worker (tests/runtime/support/cluster_processes.py's)."""
    import tensorgrid as tf

    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.ones((3, 2), np.float32), name="w")
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [None, 3])
            train = tf.train.GradientDescentOptimizer(0.5).minimize(tf.reduce_sum(tf.matmul(x, w)))
    with tf.Session(target, graph=g) as sess:
        sess.run(w.initializer)
        for _ in range(3):
            sess.run(train, {x: np.ones((2, 3), np.float32)})
        return sess.run(w)


def _get_status(address: str, credentials: grpc.ChannelCredentials) -> bytes:
    channel = grpc.secure_channel(address, credentials)
    try:
        answer: bytes = channel.unary_unary("/tensorgrid.v1.Worker/GetStatus")(b"", timeout=5)
        return answer
    finally:
        channel.close()


@pytest.mark.usefixtures("cert_manager_running")
def test_each_replica_gets_a_certificate_of_its_job_s_own_ca_from_cert_manager(
        controlplane: ControlPlane, own_namespace: Namespace, tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cp, namespace = controlplane, own_namespace
    pods = {"secure-ps-0", "secure-worker-0", "secure-worker-1"}
    with running_operator(_settings(cp, namespace, PER_JOB)):
        namespace.apply(job_manifest("secure", ps=1, workers=2, policy="OnFailure"))
        namespace.apply(job_manifest("other", ps=0, workers=1))
        created = namespace.wait_pods("secure", pods)
        certificates = _wait_issued(namespace, "secure", {"secure-ca", *(f"{p}-tls" for p in pods)})
        _wait_issued(namespace, "other", {"other-ca", "other-worker-0-tls"})
        _check_issued(namespace, created, certificates, tmp_path, monkeypatch)
        # A failed worker is replaced: the new pod mounts the same Secret; its Certificate is not made again.
        namespace.run_all("secure")
        namespace.wait_state("secure", "Running")
        before = {n: c["metadata"]["resourceVersion"] for n, c in _objects(namespace, "certificates", "secure").items()}
        old_uid = created["secure-worker-1"]["metadata"]["uid"]
        namespace.set_phase("secure-worker-1", "Failed", 1)
        wait_for(lambda: namespace.pods("secure").get("secure-worker-1", {}).get("metadata", {}).get("uid")
                 not in (None, old_uid), 30, "worker-1 recreated")
        replaced = namespace.pods("secure")["secure-worker-1"]
        assert [v["secret"]["secretName"] for v in replaced["spec"]["volumes"] if "secret" in v] == [
            "secure-worker-1-tls"]
        assert {n: c["metadata"]["resourceVersion"]
                for n, c in _objects(namespace, "certificates", "secure").items()} == before
        # Deleting the job: the garbage collector takes its Issuers and Certificates, and with them the Secrets.
        cp.custom.delete_namespaced_custom_object("tensorgrid.io", "v1", namespace.name, "trainingjobs", "secure")
        wait_for(lambda: not _objects(namespace, "certificates", "secure")
                 and not _objects(namespace, "issuers", "secure")
                 and not [s for s in cp.core.list_namespaced_secret(namespace.name).items
                          if s.metadata.name.startswith("secure-")], 60, "garbage collection of the job's objects")
        assert set(_objects(namespace, "certificates", "other")) == {"other-ca", "other-worker-0-tls"}


def _check_issued(namespace: Namespace, created: dict[str, dict[str, Any]], certificates: dict[str, dict[str, Any]],
                  tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorgrid.distributed.rpc.transport import tls

    cp = namespace.cp
    job = namespace.job("secure")
    assert job is not None
    uid = job["metadata"]["uid"]
    issuers = _objects(namespace, "issuers", "secure")
    assert set(issuers) == {"secure-selfsigned", "secure-ca"}
    for obj in [*issuers.values(), *certificates.values()]:
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainingJob", uid, True)
    ca_files = _files(namespace, "secure-ca")
    ca = x509.load_pem_x509_certificate(ca_files["tls.crt"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    directories = {}
    for pod_name, pod in created.items():
        secret = f"{pod_name}-tls"
        assert [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v] == [secret]
        files = _files(namespace, secret)
        assert files["ca.crt"] == ca_files["tls.crt"], "a replica trusts its job's CA, and only it"
        leaf = x509.load_pem_x509_certificate(files["tls.crt"])
        leaf.verify_directly_issued_by(ca)
        assert _names(leaf) == ([pod_name, f"{pod_name}.{namespace.name}", f"{pod_name}.{namespace.name}.svc",
                                 f"{pod_name}.{namespace.name}.svc.cluster.local", "localhost"], ["127.0.0.1", "::1"])
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        secret_owner = cp.core.read_namespaced_secret(secret, namespace.name).metadata.owner_references[0]
        assert (secret_owner.kind, secret_owner.name) == ("Certificate", secret)
        directories[pod_name] = _write(files, tmp_path / pod_name)
        assert tls.load(directories[pod_name]).ca == files["ca.crt"]  # the runtime takes the three files as they are
    outsider = tls.load(_write(_files(namespace, "other-worker-0-tls"), tmp_path / "other-worker-0"))

    # Two real tasks on loopback, each with its replica's certificate; the client is worker 1.
    ps_port, worker_port = free_port(), free_port()
    cluster = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{worker_port}"]}
    tasks = []
    try:
        for kind, pod_name in (("ps", "secure-ps-0"), ("worker", "secure-worker-0")):
            env = {**os.environ, "PYTHONUNBUFFERED": "1", tls.TLS_DIR_ENV: directories[pod_name],
                   "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}})}
            log = open(tmp_path / f"{kind}.log", "w")
            tasks.append((subprocess.Popen([sys.executable, "-m", "tensorgrid", "server"], env=env, stdout=log,
                                           stderr=subprocess.STDOUT), tmp_path / f"{kind}.log"))
        member = tls.load(directories["secure-worker-1"])

        def listening() -> bool:
            for process, log_path in tasks:
                assert process.poll() is None, log_path.read_text()[-3000:]
            try:
                return bool(_get_status(f"localhost:{worker_port}", member.grpc_channel())) and bool(
                    _get_status(f"localhost:{ps_port}", member.grpc_channel()))
            except grpc.RpcError:
                return False

        wait_for(listening, 60, "both tasks to answer a member of the job over mutual TLS")
        monkeypatch.setenv(tls.TLS_DIR_ENV, directories["secure-worker-1"])
        # The worker reaches the PS with its own certificate: task to task, both ends checked.
        np.testing.assert_allclose(_train_over_mutual_tls(f"grpc://localhost:{worker_port}"), np.full((3, 2), -2.0))
        for address in (f"localhost:{worker_port}", f"localhost:{ps_port}"):
            with pytest.raises(grpc.RpcError) as refused:  # a certificate of another job's CA
                _get_status(address, grpc.ssl_channel_credentials(
                    root_certificates=member.ca, private_key=outsider.key, certificate_chain=outsider.certificate))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        for process, _ in tasks:
            process.kill()
            process.wait(30)


@pytest.mark.usefixtures("cert_manager_running")
def test_a_job_the_operator_started_keeps_the_operator_s_ca_in_cert_manager_mode(
        controlplane: ControlPlane, own_namespace: Namespace) -> None:
    """Switching the chart to cert-manager while a job runs: the job's CA Secret (with its key) is left alone,
    not handed to cert-manager, and its replaced pods get certificates of that CA."""
    cp, namespace = controlplane, own_namespace
    with running_operator(operator_settings(cp, (namespace.name,))):
        namespace.apply(job_manifest("before", ps=1, workers=1, policy="OnFailure"))
        namespace.wait_pods("before", {"before-ps-0", "before-worker-0"})
        namespace.run_all("before")
        namespace.wait_state("before", "Running")
    ca_before = _files(namespace, "before-ca")
    assert "ca.key" in ca_before
    with running_operator(_settings(cp, namespace, PER_JOB)):
        cp.core.delete_namespaced_secret("before-worker-0-tls", namespace.name)  # so the new pod needs one made
        old_uid = namespace.pods("before")["before-worker-0"]["metadata"]["uid"]
        namespace.set_phase("before-worker-0", "Failed", 1)
        wait_for(lambda: namespace.pods("before").get("before-worker-0", {}).get("metadata", {}).get("uid")
                 not in (None, old_uid), 30, "worker-0 recreated")
        leaf = x509.load_pem_x509_certificate(_files(namespace, "before-worker-0-tls")["tls.crt"])
        leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_before["ca.crt"]))
        assert not _objects(namespace, "certificates", "before") and not _objects(namespace, "issuers", "before")
        assert _files(namespace, "before-ca") == ca_before


@pytest.mark.usefixtures("cert_manager_running")
def test_with_a_cluster_issuer_every_job_shares_its_ca(controlplane: ControlPlane, own_namespace: Namespace) -> None:
    """The trade-off of ``certificates.certManager.issuerRef``: no objects per job, one CA for all jobs."""
    cp, namespace = controlplane, own_namespace
    name = f"tensorgrid-test-{uuid.uuid4().hex[:6]}"
    bootstrap = f"{name}-selfsigned"
    cluster_objects = [
        {"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": {"name": bootstrap},
         "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {"name": name, "namespace": cert_manager_controller.CLUSTER_RESOURCE_NAMESPACE},
         "spec": {"isCA": True, "commonName": name, "secretName": name,
                  "privateKey": {"algorithm": "ECDSA", "size": 256},
                  "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": bootstrap}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": {"name": name},
         "spec": {"ca": {"secretName": name}}},
    ]
    cp.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in cluster_objects))
    shared = cert_manager.CertManagerSettings(cert_manager.CERT_MANAGER,
                                              cert_manager.IssuerRef("ClusterIssuer", name))
    try:
        with running_operator(_settings(cp, namespace, shared)):
            namespace.apply(job_manifest("one", ps=0, workers=1))
            namespace.apply(job_manifest("two", ps=0, workers=1))
            namespace.wait_pods("one", {"one-worker-0"})
            namespace.wait_pods("two", {"two-worker-0"})
            one = _wait_issued(namespace, "one", {"one-worker-0-tls"})
            _wait_issued(namespace, "two", {"two-worker-0-tls"})
        assert one["one-worker-0-tls"]["spec"]["issuerRef"] == {"group": "cert-manager.io", "kind": "ClusterIssuer",
                                                               "name": name}
        assert not _objects(namespace, "issuers", "one"), "no Issuer per job"
        ca_one, ca_two = _files(namespace, "one-worker-0-tls")["ca.crt"], _files(namespace, "two-worker-0-tls")["ca.crt"]
        assert ca_one == ca_two, "one CA: a certificate of job two is let into job one's tasks as a client"
        x509.load_pem_x509_certificate(_files(namespace, "two-worker-0-tls")["tls.crt"]).verify_directly_issued_by(
            x509.load_pem_x509_certificate(ca_one))
    finally:
        cp.kubectl("delete", "-f", "-", "--ignore-not-found", stdin="\n---\n".join(json.dumps(o) for o in cluster_objects))
        cp.kubectl("-n", cert_manager_controller.CLUSTER_RESOURCE_NAMESPACE, "delete", "secret", name,
                   "--ignore-not-found")
