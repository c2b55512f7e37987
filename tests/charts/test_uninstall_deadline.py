"""`helm uninstall` finishes promptly even when the uninstall hook's image cannot be pulled.

The hook Job has a deadline (``uninstall.timeoutSeconds``, image pull included) and is deleted
when it fails, so a release whose image never pulled (a wrong ``image.registry``) uninstalls in
about that many seconds, not in helm's 5 minutes, and leaves no Job behind. On the test control
plane no node runs pods, so the hook's pod stays Pending exactly as one whose image cannot be
pulled does; kube-controller-manager's Job controller enforces the deadline.
"""

from __future__ import annotations

import time

import pytest

from chart_support import CHART, by_kind, is_hook, render, run_helm
from kube_controlplane import ControlPlane, wait_for

RELEASE = "tg-deadline"
NAMESPACE = "chart-uninstall-deadline"
HOOK = f"{RELEASE}-tensorgrid-operator-uninstall"


def test_the_hook_job_has_a_deadline_and_goes_when_it_fails() -> None:
    (job,) = by_kind([m for m in render({}, hooks=True) if is_hook(m)], "Job")
    assert job["spec"]["activeDeadlineSeconds"] == 60
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    assert "hook-failed" in job["metadata"]["annotations"]["helm.sh/hook-delete-policy"].split(",")
    (longer,) = by_kind(render({"uninstall": {"timeoutSeconds": 600}}, hooks=True), "Job")
    assert longer["spec"]["activeDeadlineSeconds"] == 600


@pytest.mark.controlplane
def test_uninstall_with_an_unpullable_image_ends_at_the_hooks_deadline(controlplane: ControlPlane) -> None:
    kubeconfig = ("--kubeconfig", controlplane.kubeconfig)
    # No kopf peering, so that this release's peering object cannot meet another test's (its Lease is in its own
    # namespace); without CRDs, which the harness installed and owns (test_crd_upgrade.py installs the chart's).
    run_helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace", "--skip-crds",
             "--set", "crds.install=false",
             "--set", "image.registry=registry.invalid", "--set", "uninstall.timeoutSeconds=5",
             "--set", "peering.enabled=false", "--set", "rbac.aggregateToDefaultRoles=false", *kubeconfig)
    try:
        started = time.monotonic()
        uninstalled = run_helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--timeout", "120s", *kubeconfig,
                               check=False)
        took = time.monotonic() - started
    finally:
        run_helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--no-hooks", "--ignore-not-found", *kubeconfig,
                 check=False)
    assert took < 45, f"helm uninstall took {took:.0f}s: {uninstalled.stderr}"
    assert "DeadlineExceeded" in uninstalled.stderr, uninstalled.stderr
    assert run_helm("status", RELEASE, "--namespace", NAMESPACE, *kubeconfig, check=False).returncode != 0
    wait_for(lambda: controlplane.kubectl("get", "job", HOOK, "-n", NAMESPACE, check=False).returncode != 0, 30,
             f"the failed hook job {HOOK} to be deleted")
    leftover = controlplane.kubectl("get", "clusterrole", HOOK, check=False)
    assert leftover.returncode != 0, leftover.stdout
    controlplane.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
