"""Kueue's real manager beside the test control plane, for TrainingJobs queued by Kueue.

``hack/tools.sh --with-kueue`` builds ``kueue`` (Kueue's manager, release ``KUEUE_VERSION`` of
that script) and copies the release's CRDs and webhook configurations into ``kueue-config/``.
``running_kueue`` installs the CRDs, runs the manager against the control plane with the
plain-Pod integration enabled (Kueue's "Run Plain Pods" setup) and no other, and registers its
webhooks with the API server: the pod webhooks (Kueue's scheduling gate on queued pods) for the
namespaces labelled ``NAMESPACE_LABEL`` only, so the other tests' pods never meet them, and
Kueue's own objects' webhooks (defaulting and validation of queues and Workloads). The webhook
and metrics servers listen on loopback with a certificate of a CA made for the run (Kueue's own
certificate management needs a Service in front of it, which a manager outside the cluster has
not); the pending-workloads API (``VisibilityOnDemand``), an aggregated API server, is off.

At the end every Kueue object is deleted while the manager still runs (it removes its
finalizers from pods and Workloads), then the webhooks go before the manager stops, so that no
pod create anywhere waits for a server that is gone, then the CRDs, so that the other tests see
the cluster as they expect it.

Without the manager the tests skip, except under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import pathlib
import socket
import ssl
import subprocess
import tempfile
import urllib.request
from typing import Any, Iterator

import yaml

import built_tools
from kube_controlplane import wait_crds_established
from operator_cluster import ControlPlane, free_port, wait_for
from tensorgrid.distributed.rpc import certificates

MANAGER = "kueue"
CONFIG = "kueue-config"
GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
NAMESPACE = "kueue-system"
"""Kueue's own namespace (its configuration's default): it records events there."""
NAMESPACE_LABEL = "tensorgrid.io/kueue-test"
"""Kueue manages the pods of the namespaces with this label (``managedJobsNamespaceSelector``)."""
WEBHOOK_CONFIGURATIONS = ("tensorgrid-test-kueue-mutating", "tensorgrid-test-kueue-validating")
NAMESPACED_KINDS = ("workloads", "localqueues")
CLUSTER_KINDS = ("clusterqueues", "resourceflavors", "workloadpriorityclasses", "cohorts", "topologies",
                 "admissionchecks")
POD_FINALIZER = "kueue.x-k8s.io/managed"


@dataclasses.dataclass
class Kueue:
    """The running manager, with the reads and writes of Kueue's objects the tests need."""

    cp: ControlPlane
    log_path: pathlib.Path

    def create(self, kind: str, name: str, spec: dict[str, Any], namespace: str = "", **extra: Any) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, **extra}
        if spec:
            body["spec"] = spec
        plural = kind.lower() + ("es" if kind.endswith("s") else "s")
        if namespace:
            body["metadata"]["namespace"] = namespace
            self.cp.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
        else:
            self.cp.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        found = self.cp.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads")
        return list(found["items"])

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-8000:]


def _install_crds(cp: ControlPlane, config: pathlib.Path) -> list[str]:
    names = []
    for path in sorted((config / "crds").glob("*.yaml")):
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        names.append(yaml.safe_load(path.read_text())["metadata"]["name"])
    wait_crds_established(cp, *names)
    return names


def webhook_configurations(manifests: str, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations cut to the webhooks of pods and of Kueue's own objects, each
    calling ``https://127.0.0.1:<port><its path>``; the pod webhooks only in namespaces labelled
    ``NAMESPACE_LABEL``. The other integrations' webhooks are dropped: their servers do not run."""
    configurations = []
    for document, name in zip(yaml.safe_load_all(manifests), WEBHOOK_CONFIGURATIONS):
        kept = []
        for webhook in document["webhooks"]:
            groups = {group for rule in webhook["rules"] for group in rule["apiGroups"]}
            resources = {resource for rule in webhook["rules"] for resource in rule["resources"]}
            if groups == {""} and resources == {"pods"}:
                webhook["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: "true"}}
            elif groups != {GROUP}:
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                       "caBundle": base64.b64encode(ca_pem).decode()}
            kept.append(webhook)
        assert any("pods" in rule["resources"] for webhook in kept for rule in webhook["rules"]), \
            f"Kueue's {document['kind']} has no pod webhook"
        document["metadata"] = {"name": name}
        document["webhooks"] = kept
        configurations.append(document)
    return configurations


def _ready(health_port: int, webhook_port: int, ca_file: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as answer:
            if answer.status != 200:
                return False
        context = ssl.create_default_context(cafile=ca_file)
        with socket.create_connection(("127.0.0.1", webhook_port), timeout=2) as connection, \
                context.wrap_socket(connection, server_hostname="127.0.0.1"):
            return True
    except OSError:
        return False


def _delete_kueue_objects(cp: ControlPlane) -> None:
    """Every Kueue object, deleted and waited for while the manager runs to remove its finalizers."""
    kinds = ",".join(f"{plural}.{GROUP}" for plural in NAMESPACED_KINDS + CLUSTER_KINDS)
    cp.kubectl("delete", kinds, "--all-namespaces", "--all", "--wait=false", check=False)

    def gone() -> bool:
        listed = cp.kubectl("get", kinds, "--all-namespaces", "-o", "name", check=False)
        return listed.returncode == 0 and not listed.stdout.strip()

    wait_for(gone, 60, "every Kueue object to be deleted")


def _strip_pod_finalizers(cp: ControlPlane) -> None:
    """Kueue's finalizer off any pod still carrying it once the manager is gone (a test that failed
    halfway), so that its namespace can be deleted."""
    for pod in cp.core.list_pod_for_all_namespaces(label_selector=f"{GROUP}/managed").items:
        finalizers = [f for f in pod.metadata.finalizers or [] if f != POD_FINALIZER]
        cp.core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace, {"metadata": {
            "finalizers": finalizers, "resourceVersion": pod.metadata.resource_version}})


@contextlib.contextmanager
def running_kueue(cp: ControlPlane) -> Iterator[Kueue]:
    """Kueue's CRDs, manager and webhooks against ``cp`` until the block ends; then all are gone again."""
    manager, config = built_tools.built("--with-kueue", MANAGER, CONFIG)  # skips, or fails under CI=true
    crds = _install_crds(cp, config)
    if cp.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        cp.kubectl("create", "namespace", NAMESPACE)
    with tempfile.TemporaryDirectory(prefix="kueue-") as work_dir:
        work = pathlib.Path(work_dir)
        authority = certificates.new_authority("tensorgrid test Kueue webhook CA")
        cert_dir = certificates.write_task_directory(str(work / "certs"), authority, "kueue-webhook", ("127.0.0.1",))
        webhook_port, health_port, metrics_port = free_port(), free_port(), free_port()
        settings = {
            "apiVersion": f"config.{GROUP}/{VERSION}", "kind": "Configuration", "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": cert_dir},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "managedJobsNamespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "true"}},
            "integrations": {"frameworks": ["pod"]},
        }
        (work / "config.yaml").write_text(json.dumps(settings))
        log_path = work / "kueue.log"
        log = open(log_path, "w")
        # The metrics server serves the webhook's certificate (hack/tools.sh: KUEUE_METRICS_CERT_DIR).
        process = subprocess.Popen([str(manager), f"--config={work / 'config.yaml'}", f"--kubeconfig={cp.kubeconfig}",
                                    # The pending-workloads API is an aggregated API server: it needs
                                    # a Service and certificates of its own, and no test reads it.
                                    "--feature-gates=VisibilityOnDemand=false"],
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "KUEUE_METRICS_CERT_DIR": cert_dir})
        kueue = Kueue(cp, log_path)
        registered = False
        try:
            wait_for(lambda: process.poll() is not None or _ready(health_port, webhook_port, f"{cert_dir}/ca.crt"), 60,
                     "Kueue's manager to be ready", kueue.log_tail)
            assert process.poll() is None, f"{MANAGER} exited ({process.returncode}): {kueue.log_tail()}"
            for configuration in webhook_configurations((config / "webhooks.yaml").read_text(), webhook_port,
                                                        authority.certificate_pem):
                cp.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
            registered = True
            yield kueue
            assert process.poll() is None, f"{MANAGER} exited ({process.returncode}) during the test: {kueue.log_tail()}"
        except BaseException:
            print(f"--- the end of {MANAGER}'s log ---\n{kueue.log_tail()}")  # shown with the failure
            raise
        finally:
            try:
                if registered and process.poll() is None:
                    _delete_kueue_objects(cp)
            finally:
                cp.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "--ignore-not-found",
                           *WEBHOOK_CONFIGURATIONS, check=False)
                built_tools.stop(process)
                log.close()
                _strip_pod_finalizers(cp)
                cp.kubectl("delete", "crd", "--ignore-not-found", "--wait=true", *crds, check=False)
                cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
