"""status.progress.dataShards on a real API server: the chief's shard-service gauges, served over HTTP
as the runtime serves them (epoch, fraction done, shards per epoch), reach the job's status (the CRD's
schema keeps them) and follow the epoch;
``kubectl get tj -o wide`` shows the first data set's in its EPOCH and SHARDS DONE columns.

The test plays the kubelet: the pods get the IP 127.0.0.1, where the test serves the task's metrics
page on the port the job's template declares as ``metrics``.
"""

from __future__ import annotations

from typing import Any

import metrics_pages
from operator_cluster import Namespace, Operator, job_manifest, wait_for
import pytest

pytestmark = pytest.mark.controlplane


def _shards(namespace: Namespace) -> Any:
    return namespace.status("clicks").get("progress", {}).get("dataShards")


def test_the_shard_services_epoch_and_fraction_done_reach_the_status(operator: Operator,
                                                                    namespace: Namespace) -> None:
    with metrics_pages.MetricsPage() as page:
        page.gauge("tensorgrid_global_step", "global step", ["task"]).labels(task="/job:ps/replica:0/task:0").set(40)
        epoch = page.gauge("tensorgrid_data_shards_epoch", "epoch", ["dataset"])
        done = page.gauge("tensorgrid_data_shards_done_fraction", "fraction done", ["dataset"])
        page.gauge("tensorgrid_data_shards_per_epoch", "shards per epoch", ["dataset"]).labels(dataset="clicks").set(8)
        epoch.labels(dataset="clicks").set(0)
        done.labels(dataset="clicks").set(0.25)
        manifest = job_manifest("clicks", ps=1, workers=2)
        for replica in manifest["spec"]["replicaSpecs"].values():
            replica["template"]["spec"]["containers"][0]["ports"] = [{"name": "metrics", "containerPort": page.port}]
        namespace.apply(manifest)
        for name in namespace.wait_pods("clicks", {"clicks-ps-0", "clicks-worker-0", "clicks-worker-1"}):
            namespace.set_phase(name, "Running", pod_ip="127.0.0.1")
        wait_for(lambda: _shards(namespace) == [{"dataset": "clicks", "epoch": 0, "fractionDone": 0.25,
                                                 "shardsPerEpoch": 8}], 30,
                 "the shards in status.progress", lambda: namespace.status("clicks").get("progress"))
        epoch.labels(dataset="clicks").set(1)
        done.labels(dataset="clicks").set(0.5)
        wait_for(lambda: _shards(namespace) == [{"dataset": "clicks", "epoch": 1, "fractionDone": 0.5,
                                                 "shardsPerEpoch": 8}], 30,
                 "the next epoch in status.progress", lambda: namespace.status("clicks").get("progress"))
    header, row = namespace.cp.kubectl("get", "tj", "clicks", "-n", namespace.name, "-o", "wide").stdout.splitlines()
    # kubectl aligns each value under the start of its column's name.
    assert [row[header.index(column):].split()[0] for column in ("EPOCH", "SHARDS DONE")] == ["1", "0.5"], (header, row)
