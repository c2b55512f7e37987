"""The operator's API calls reuse their connections, on a real API server.

A call whose answer is not parsed (``_preload_content=False``) must still read it and give
its connection back, or the next call opens a new one with a new TLS handshake: at 1,000
jobs that handshake was half the operator's API time and a share of the API server's CPU.
urllib3 logs each connection it opens; the test counts them.
"""

from __future__ import annotations

import logging

import pytest

from operator_cluster import Namespace
from tensorgrid_operator.cluster import kube

pytestmark = pytest.mark.controlplane

CALLS = 12


def service(namespace: str, name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": "None", "selector": {"tensorgrid.io/job-name": name}}}


def test_creations_and_deletions_reuse_one_connection(namespace: Namespace, caplog: pytest.LogCaptureFixture) -> None:
    client = kube.Kube(kube.load_config(namespace.cp.kubeconfig), pool_size=2)
    try:
        with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
            for i in range(CALLS):
                client.create_service(service(namespace.name, f"svc-{i}"))
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": namespace.name}}
            assert client.create_secret(secret) is True
            assert client.create_secret(secret) is False  # it exists: said, not raised
            for i in range(CALLS):
                client.delete_service(namespace.name, f"svc-{i}")
    finally:
        client.close()
    opened = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Starting new HTTPS connection")]
    assert len(opened) == 1, f"{len(opened)} connections opened for {2 * CALLS + 2} sequential calls: {opened}"
