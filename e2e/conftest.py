"""Fixtures of the end-to-end suite: the cluster's API client, and a namespace per test; every
test here is marked ``cluster`` (it needs the kind cluster of ``make e2e-up``).

When a test fails, what a person would look at is printed: the operator's log,
``kubectl describe`` of the test's TrainingJobs and pods, and the log of every pod of
the test.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Iterator

import kubernetes
import pytest

from cluster_support import KUBECONFIG, Namespace, kubectl


@pytest.fixture(scope="session")
def api() -> Iterator[kubernetes.client.ApiClient]:
    if not os.path.exists(KUBECONFIG):
        pytest.fail(f"no e2e cluster: {KUBECONFIG} does not exist (make e2e-up creates one)")
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=KUBECONFIG, client_configuration=configuration)
    client = kubernetes.client.ApiClient(configuration)
    yield client
    client.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture
def ns(request: pytest.FixtureRequest, api: kubernetes.client.ApiClient) -> Iterator[Namespace]:
    """A fresh namespace; on failure its diagnostics are printed; deleted afterwards."""
    name = f"e2e-{re.sub('[^a-z0-9]+', '-', request.node.name.lower())[:40].strip('-')}-{uuid.uuid4().hex[:5]}"
    kubectl("create", "namespace", name)
    namespace = Namespace(name, api)
    yield namespace
    if request.node.stash.get(_FAILED, True):
        print(f"\n===== diagnostics of {request.node.name} (namespace {name}) =====\n{namespace.diagnostics()}")
    kubectl("delete", "namespace", name, "--wait=false", check=False)


