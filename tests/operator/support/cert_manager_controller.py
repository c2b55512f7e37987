"""cert-manager's real controllers beside the test control plane, for the operator's cert-manager mode.

``hack/tools.sh --with-cert-manager`` builds ``cert-manager-controller``: cert-manager's own
controllers (Issuers, ClusterIssuers, the CertificateRequest approver and its CA and
self-signed signers, the Certificate controllers), release ``CERT_MANAGER_VERSION`` of that
script, under a small main of ours (hack/cert-manager-controller/main.go); and copies the
release's CRDs (its deploy/crds) into ``cert-manager-crds/`` beside it. ``running_cert_manager``
installs those CRDs and runs the controller against the control plane, as cert-manager's
Deployment would (without its webhook, which only validates and defaults objects), with
``--enable-certificate-owner-ref`` so that the Secrets it writes go with their Certificates.
The CRDs are cluster-wide: they are removed again at the end (``remove_crds``), so that the
other tests see the cluster as they expect it.

Without the harness the tests skip, except under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import tempfile
from typing import Iterator


import built_tools
from kube_controlplane import wait_crds_established
from operator_cluster import ControlPlane, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[3]
CONTROLLER = "cert-manager-controller"
CRDS = "cert-manager-crds"
CRD_NAMES = ("certificates.cert-manager.io", "certificaterequests.cert-manager.io", "issuers.cert-manager.io",
             "clusterissuers.cert-manager.io", "orders.acme.cert-manager.io", "challenges.acme.cert-manager.io")
CLUSTER_RESOURCE_NAMESPACE = "cert-manager"
"""Where the Secrets that ClusterIssuers name live (cert-manager's --cluster-resource-namespace)."""


def harness() -> tuple[pathlib.Path, pathlib.Path]:
    """The controller and the CRDs' folder of hack/tools.sh; skips (fails under CI=true) when they were not built."""
    controller, crds = built_tools.built("--with-cert-manager", CONTROLLER, CRDS)
    return controller, crds


def served(cp: ControlPlane) -> bool:
    """Whether the API server serves any of cert-manager's resources."""
    listed = cp.kubectl("api-resources", "--api-group=cert-manager.io", "-o", "name", check=False)
    return listed.returncode == 0 and bool(listed.stdout.strip())


def install_crds(cp: ControlPlane, crds: pathlib.Path) -> None:
    for path in sorted(crds.glob("*.yaml")):
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    wait_crds_established(cp, *CRD_NAMES)


def remove_crds(cp: ControlPlane) -> None:
    """Deletes cert-manager's CRDs (and every object of them) and waits until the API server stops serving them."""
    cp.kubectl("delete", "crd", "--ignore-not-found", "--wait=true", *CRD_NAMES)
    wait_for(lambda: not served(cp), 60, "the API server to stop serving cert-manager.io")


@contextlib.contextmanager
def running_cert_manager(cp: ControlPlane) -> Iterator[None]:
    """cert-manager's CRDs and controllers against ``cp`` until the block ends; then both are gone again."""
    controller, crds = harness()
    install_crds(cp, crds)
    if cp.kubectl("get", "namespace", CLUSTER_RESOURCE_NAMESPACE, check=False).returncode != 0:
        cp.kubectl("create", "namespace", CLUSTER_RESOURCE_NAMESPACE)
    with tempfile.TemporaryDirectory(prefix="cert-manager-") as work:
        log_path = pathlib.Path(work) / "controller.log"
        log = open(log_path, "w")
        process = subprocess.Popen(
            [str(controller), f"--kubeconfig={cp.kubeconfig}", "--enable-certificate-owner-ref",
             f"--cluster-resource-namespace={CLUSTER_RESOURCE_NAMESPACE}", "--v=2"],
            stdout=log, stderr=subprocess.STDOUT)

        def tail() -> str:
            log.flush()
            return log_path.read_text()[-8000:]

        try:
            wait_for(lambda: process.poll() is not None or "starting controller" in log_path.read_text(), 30,
                     f"{CONTROLLER} to start its controllers", tail)
            assert process.poll() is None, f"{CONTROLLER} exited ({process.returncode}): {tail()}"
            yield
            assert process.poll() is None, f"{CONTROLLER} exited ({process.returncode}) during the test: {tail()}"
        except BaseException:
            print(f"--- the end of {CONTROLLER}'s log ---\n{tail()}")  # shown with the failure
            raise
        finally:
            built_tools.stop(process)
            log.close()
            remove_crds(cp)
            cp.kubectl("delete", "namespace", CLUSTER_RESOURCE_NAMESPACE, "--wait=false", check=False)
