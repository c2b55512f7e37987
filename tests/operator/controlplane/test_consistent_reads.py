"""The consistent LISTs of a job's pods and Services, on a real API server: read in pages, kept slim.

When the indexes lag the operator's own writes, a reconcile reads the job's pods with a
LIST. The pods of a job of 2,000 replicas carry 2,000 TF_CONFIGs of 80 KB: read whole,
that one answer was hundreds of MB. So the LIST is read a page at a time and each page is
cut down to what the indexes keep (``indexed``) before the next one is read.
"""

from __future__ import annotations

import logging

import pytest

from operator_cluster import Namespace
from tensorgrid_operator.cluster import kube

pytestmark = pytest.mark.controlplane

JOB = "paged"


def service(namespace: str, name: str, job: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": {"tensorgrid.io/job-name": job}},
            "spec": {"clusterIP": "None", "selector": {"tensorgrid.io/job-name": job}}}


def pod(namespace: str, name: str, job: str) -> dict[str, object]:
    env = [{"name": "TF_CONFIG", "value": '{"cluster": {"worker": ["a:2222"]}}'}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"tensorgrid.io/job-name": job}},
            "spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:test", "env": env}]}}


def test_a_jobs_objects_are_read_in_pages_and_kept_slim(namespace: Namespace, caplog: pytest.LogCaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "LIST_PAGE", 5)
    client = kube.Kube(kube.load_config(namespace.cp.kubeconfig), pool_size=2)
    try:
        for i in range(12):
            client.create_service(service(namespace.name, f"{JOB}-{i}", JOB))
        client.create_service(service(namespace.name, "other-0", "other"))
        for i in range(3):
            client.create_pod(pod(namespace.name, f"{JOB}-{i}", JOB))
        with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
            services = client.list_services(namespace.name, JOB)
        pods = client.list_pods(namespace.name, JOB)
    finally:
        client.close()
    assert sorted(s["metadata"]["name"] for s in services) == sorted(f"{JOB}-{i}" for i in range(12))
    assert all(set(s) == {"metadata"} and set(s["metadata"]) == {"name", "uid"} for s in services), services[0]
    lists = [r.getMessage() for r in caplog.records if "/services?" in r.getMessage()]
    assert len(lists) == 3 and sum("continue=" in line for line in lists) == 2, lists
    assert sorted(p["metadata"]["name"] for p in pods) == [f"{JOB}-{i}" for i in range(3)]
    assert all(p["spec"]["containers"] == [{"name": "tensorgrid"}] for p in pods), "no env, no TF_CONFIG"
    assert all(p["status"]["phase"] == "Pending" and p["metadata"]["labels"] == {"tensorgrid.io/job-name": JOB}
               for p in pods)
