"""One real Kubernetes control plane per test run, shared by the operator's and the chart's tests.

Why it exists: tests/operator and tests/charts both need a control plane, and starting etcd +
kube-apiserver + kube-controller-manager + kube-scheduler is the slowest step of either (about
12 s on 2 cores, more on a loaded machine): `pytest tests/operator tests/charts` (or `make test`)
starts it once, not once per directory.

``controlplane`` (session-scoped; tests/conftest.py makes it every directory's fixture) runs
hack/controlplane.sh in a temporary directory with the binaries of hack/build-kubernetes.sh
(cached in ~/.cache/tensorgrid/kubernetes), installs the repository's CRDs (crds/: TrainingJob
and kopf's peering CRDs, which the chart ships too), and stops everything at the end. Set
``TENSORGRID_KUBECONFIG`` to use one already running (``make controlplane`` writes
.cache/controlplane/kubeconfig). Without binaries the tests that use it skip, except under
``CI=true``, where they fail: CI must run them.

The tests share the cluster, so each keeps its jobs to namespaces of its own: the operator that
tests/operator runs in this process watches ``tg-*``, the chart's tests make theirs in ``chart-*``;
a test that changes something cluster-wide (a CRD, kopf's peering object) puts it back, and a
test that runs an operator for every namespace first waits until the other tests' jobs are gone
(``ControlPlane.wait_until_no_training_jobs``).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from typing import Any, Callable, Iterator, Optional

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CRDS = ROOT / "crds"
CRD_NAMES = ("trainingjobs.tensorgrid.io", "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")
HACK = ROOT / "hack"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class ControlPlane:
    """A running control plane: its admin kubeconfig, kubectl, and API clients."""

    def __init__(self, kubeconfig: str, bin_dir: pathlib.Path) -> None:
        import kubernetes

        self.kubeconfig = kubeconfig
        self.bin_dir = bin_dir
        self.kubectl_path = bin_dir / "kubectl"
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = 16
        self.api = kubernetes.client.ApiClient(configuration)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.networking = kubernetes.client.NetworkingV1Api(self.api)
        self.policy = kubernetes.client.PolicyV1Api(self.api)

    def kubectl(self, *args: str, stdin: Optional[str] = None, check: bool = True,
                kubeconfig: Optional[str] = None) -> subprocess.CompletedProcess[str]:
        """kubectl as the admin, or as whoever ``kubeconfig`` names; fails the test on an error when ``check``."""
        result = subprocess.run([str(self.kubectl_path), "--kubeconfig", kubeconfig or self.kubeconfig, *args],
                                input=stdin, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def training_jobs(self) -> set[str]:
        """Every TrainingJob of the cluster, as ``namespace/name``."""
        out = self.kubectl("get", "trainingjobs", "--all-namespaces", "-o",
                           r'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}').stdout
        return set(out.split())

    def wait_until_no_training_jobs(self, timeout: float = 120) -> None:
        """Returns once no TrainingJob is left in the cluster: what a test needs before it runs an operator
        (or the chart's uninstall hook) for every namespace, which would take the jobs other tests left
        behind while their namespaces are deleted."""
        wait_for(lambda: not self._release_deleted_jobs(), timeout, "the TrainingJobs of other tests to be gone",
                 self.training_jobs)

    def _release_deleted_jobs(self) -> set[str]:
        """The jobs left; those already being deleted (a finished test's namespace, whose operator
        may have stopped, e.g. with a pod stuck on a lost KWOK node) lose their finalizers so
        that they go."""
        out = self.kubectl("get", "trainingjobs", "--all-namespaces", "-o",
                           r'jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{.metadata.namespace} '
                           r'{.metadata.name}{"\n"}{end}').stdout
        for line in out.splitlines():
            namespace, name = line.split()
            self.kubectl("patch", "trainingjob", name, "-n", namespace, "--type=merge", "-p",
                         '{"metadata":{"finalizers":null}}', check=False)
        return self.training_jobs()


def binaries_dir() -> pathlib.Path:
    out = subprocess.run([str(HACK / "build-kubernetes.sh"), "--print-bin-dir"], capture_output=True, text=True,
                         check=True)
    return pathlib.Path(out.stdout.strip())


def _unavailable(why: str) -> None:
    message = (f"{why}: the operator's and the chart's tests need a Kubernetes control plane; build its "
               f"binaries with `make kubernetes-binaries` (hack/build-kubernetes.sh), or start one with "
               f"`make controlplane` and set TENSORGRID_KUBECONFIG=.cache/controlplane/kubeconfig")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             detail: Optional[Callable[[], Any]] = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f"; last seen: {detail()}" if detail else ""))
        time.sleep(0.1)


def wait_crds_established(cp: ControlPlane, *names: str) -> None:
    """Waits until each CRD is Established. Not `kubectl wait`: it fails at once ("status.conditions
    accessor error") when it reads a CRD whose status the API server has not written yet."""
    def established(name: str) -> bool:
        path = '{.status.conditions[?(@.type=="Established")].status}'
        return cp.kubectl("get", "crd", name, "-o", f"jsonpath={path}", check=False).stdout.strip() == "True"

    for name in names:
        wait_for(lambda: established(name), 60, f"crd/{name} to be Established")


def _install_crds(cp: ControlPlane) -> None:
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    wait_crds_established(cp, *CRD_NAMES)
    wait_for(lambda: cp.kubectl("get", "tj", "-A", check=False).returncode == 0, 30, "the tj resource to serve")


@pytest.fixture(scope="session")
def controlplane() -> Iterator[ControlPlane]:
    reuse = os.environ.get("TENSORGRID_KUBECONFIG")
    try:
        bin_dir = binaries_dir()
    except (OSError, subprocess.CalledProcessError) as e:
        _unavailable(f"hack/build-kubernetes.sh --print-bin-dir failed ({e})")
    missing = [b for b in (("kubectl",) if reuse else COMPONENTS) if not (bin_dir / b).exists()]
    if missing:
        _unavailable(f"missing {', '.join(missing)} in {bin_dir}")
    state_dir: Optional[str] = None
    if reuse:
        kubeconfig = reuse
    else:
        state_dir = tempfile.mkdtemp(prefix="tensorgrid-controlplane-")
        started = time.monotonic()
        up = subprocess.run([str(HACK / "controlplane.sh"), "up", state_dir], capture_output=True, text=True,
                            timeout=400)
        if up.returncode != 0:
            subprocess.run([str(HACK / "controlplane.sh"), "down", state_dir], capture_output=True, timeout=120)
            shutil.rmtree(state_dir, ignore_errors=True)
            pytest.fail(f"hack/controlplane.sh up failed:\n{up.stderr[-4000:]}", pytrace=False)
        kubeconfig = up.stdout.strip().splitlines()[-1]
        print(f"\ncontrol plane started in {time.monotonic() - started:.1f}s ({state_dir})")
    cp: Optional[ControlPlane] = None
    try:
        cp = ControlPlane(kubeconfig, bin_dir)
        _install_crds(cp)
        yield cp
    finally:
        if cp is not None:
            cp.api.close()
        if state_dir is not None:
            subprocess.run([str(HACK / "controlplane.sh"), "down", state_dir], capture_output=True, timeout=120)
            shutil.rmtree(state_dir, ignore_errors=True)
