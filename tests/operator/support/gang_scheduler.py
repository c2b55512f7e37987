"""A real gang scheduler on the test control plane: scheduler-plugins' Coscheduling, as a second scheduler.

scheduler-plugins (sigs.k8s.io/scheduler-plugins, built by ``hack/tools.sh
--with-gang-scheduler``) is kube-scheduler with extra plugins, plus a controller that keeps
each PodGroup's ``status.phase``. ``running_scheduler_plugins`` runs both as its install
does: the scheduler with one profile, named like the operator's default
``--gang-scheduler-name`` (``scheduler-plugins-scheduler``), whose Coscheduling plugin binds
a PodGroup's pods only once ``minMember`` of them fit (they wait at its Permit stage, then
are all released or all rejected); the control plane's own kube-scheduler keeps scheduling
every other pod. The PodGroup CRD is the upstream one (tests/operator/support/crds).

Without the binaries the tests skip, except under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import contextlib
import pathlib
import ssl
import subprocess
import tempfile
import urllib.request
from typing import Iterator


import built_tools
from kube_controlplane import wait_crds_established
from operator_cluster import ControlPlane, free_port, wait_for
from tensorgrid_operator.resources import podgroups

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRDS = pathlib.Path(__file__).parent / "crds"
CRD_FILES = {"podgroups.scheduling.volcano.sh": "scheduling.volcano.sh_podgroups.yaml",
             "podgroups.scheduling.x-k8s.io": "scheduling.x-k8s.io_podgroups.yaml",
             "elasticquotas.scheduling.x-k8s.io": "scheduling.x-k8s.io_elasticquotas.yaml"}
# ElasticQuota: unused here, but scheduler-plugins' controller watches it too and exits after 2 minutes without it.
VOLCANO_CRD, PLUGINS_CRD, QUOTA_CRD = CRD_FILES
SCHEDULER = "scheduler-plugins-scheduler"
CONTROLLER = "scheduler-plugins-controller"
# How long a group's first pods wait at Permit for the rest (upstream's example config: 10 s); then all are
# rejected and tried again. Short, so a job that waits keeps retrying while the test adds capacity.
PERMIT_WAITING_SECONDS = 5
# How long a pod the scheduler found unschedulable waits before it is tried again, at most (kube-scheduler's
# default: 5 minutes). Coscheduling's rejections are retried only on a new pod or a PodGroup change, not on a
# new node (its EventsToRegister), so a job waiting for capacity starts up to this long after it appears.
RETRY_UNSCHEDULABLE_SECONDS = 10
# kube-scheduler 1.33-1.35 can drop a pod from its queue for good (kubernetes/kubernetes#139186, fixed by #139450,
# not in v1.34.10): a pod rejected at Permit (Coscheduling's wait) is requeued before it stops counting as in flight,
# and a Pop waiting on the backoff queue (SchedulerPopFromBackoffQ, on by default) takes it in that window and
# discards it as "tracked in multiple places". The group then never has minMember pods at Permit: one run in 7 of
# the capacity test timed out so. With the gate off, a pod just rejected waits out its backoff (1 s or more) before
# it can be popped, long after the window.
FEATURE_GATES = "SchedulerPopFromBackoffQ=false"
# What kube-scheduler logs when it discards a pod so (an error, at any verbosity).
DROPPED_POD = "The same pod is tracked in multiple places in the scheduler"


def install_crds(cp: ControlPlane, *names: str) -> None:
    """Installs the PodGroup CRDs (``VOLCANO_CRD``, ``PLUGINS_CRD``) and waits until they serve."""
    for name in names:
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS / CRD_FILES[name]))
    wait_crds_established(cp, *names)


def binaries() -> tuple[pathlib.Path, pathlib.Path]:
    """The scheduler and the controller of hack/tools.sh; skips (fails under CI=true) when they were not built."""
    scheduler, controller = built_tools.built("--with-gang-scheduler", SCHEDULER, CONTROLLER)
    return scheduler, controller


def scheduler_config(kubeconfig: str) -> str:
    """The scheduler's KubeSchedulerConfiguration: one profile, Coscheduling sorting the queue and gating binds."""
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: {kubeconfig}
profiles:
- schedulerName: {podgroups.DEFAULT_SCHEDULER_PLUGINS_NAME}
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: {PERMIT_WAITING_SECONDS}
"""


def _healthy(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving certificate
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=context) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def running_scheduler_plugins(cp: ControlPlane) -> Iterator[None]:
    """scheduler-plugins' scheduler and controller against ``cp`` until the block ends (the PodGroup CRD installed)."""
    scheduler, controller = binaries()
    install_crds(cp, PLUGINS_CRD, QUOTA_CRD)
    with tempfile.TemporaryDirectory(prefix="scheduler-plugins-") as work:
        config = pathlib.Path(work) / "scheduler.yaml"
        config.write_text(scheduler_config(cp.kubeconfig))
        port = free_port()
        logs = {name: open(pathlib.Path(work) / f"{name}.log", "w") for name in (SCHEDULER, CONTROLLER)}
        processes = {
            SCHEDULER: subprocess.Popen(
                [str(scheduler), f"--config={config}", "--bind-address=127.0.0.1", f"--secure-port={port}",
                 f"--cert-dir={work}/certs", "--v=2", f"--feature-gates={FEATURE_GATES}",
                 f"--pod-max-in-unschedulable-pods-duration={RETRY_UNSCHEDULABLE_SECONDS}s"],
                stdout=logs[SCHEDULER], stderr=subprocess.STDOUT),
            CONTROLLER: subprocess.Popen(
                [str(controller), f"--kubeconfig={cp.kubeconfig}", "--metricsAddr=0", "--probeAddr=0"],
                stdout=logs[CONTROLLER], stderr=subprocess.STDOUT),
        }

        def log_text(name: str) -> str:
            logs[name].flush()
            return pathlib.Path(logs[name].name).read_text()

        def tail(name: str) -> str:
            return log_text(name)[-6000:]

        def scheduler_up() -> bool:
            for name, process in processes.items():
                if process.poll() is not None:
                    raise AssertionError(f"{name} exited ({process.returncode}): {tail(name)}")
            return _healthy(port)

        try:
            wait_for(scheduler_up, 60, f"{SCHEDULER} /healthz")
            yield
            scheduler_up()  # both still running: the test saw them at work throughout
        except BaseException:
            for name in processes:  # shown with the failure (pytest's captured output)
                print(f"--- the end of {name}'s log ---\n{tail(name)}")
            dropped = [line for line in log_text(SCHEDULER).splitlines() if DROPPED_POD in line]
            if dropped:
                print(f"--- {SCHEDULER} dropped pods from its queue (kubernetes/kubernetes#139186) ---")
                print("\n".join(dropped))
            raise
        finally:
            built_tools.stop(*processes.values())
            for name in processes:
                logs[name].close()
