"""``tf.metrics`` in a real cluster (a ``tensorgrid server`` PS and a worker), against TF1.

TensorFlow's ``replica_device_setter`` places ops by type, not by collection: a metric's
local variables (VariableV2 ops) go to the parameter servers like any variable, which
TensorFlow 2.21 shows too; a metric built under ``tf.device`` of the worker keeps its
variables on the worker. Either way the worker's session streams batches through the update
ops, the values equal ``tf.compat.v1`` running the same batches in one process, and
``tf.local_variables_initializer()`` resets the variables on whichever task holds them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)

WORKER = "/job:worker/task:0"


def batches() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.RandomState(7)
    out = []
    for _ in range(3):
        labels = rng.randint(0, 2, 40).astype(np.int64)
        out.append((labels, np.clip(0.3 * labels + 0.7 * rng.rand(40), 0, 1).astype(np.float32)))
    return out


def build(lib: Any, cluster: Any, placement: str) -> tuple[Any, Any, Any, dict[str, Any]]:
    labels = lib.placeholder(lib.int64, [None], name="labels")
    probabilities = lib.placeholder(lib.float32, [None], name="probabilities")
    device: Any = None
    if placement == "replica_device_setter":
        device = lib.train.replica_device_setter(cluster=cluster, worker_device=WORKER)
    elif placement == "worker":
        device = WORKER
    with lib.device(device):
        metrics = {"accuracy": lib.metrics.accuracy(labels, lib.cast(lib.greater(probabilities, 0.5), lib.int64)),
                   "auc": lib.metrics.auc(labels, probabilities),
                   "recall": lib.metrics.recall(labels, lib.greater(probabilities, 0.5))}
    return labels, probabilities, lib.local_variables(), metrics


def devices(lib: Any, cluster: Any, placement: str) -> dict[str, str]:
    with lib.Graph().as_default():
        _, _, local, _ = build(lib, cluster, placement)
        return {v.op.name: v.device for v in local}


def stream(lib: Any, target: str, cluster: Any, placement: str) -> list[dict[str, float]]:
    """Each metric's value after each batch, then after a reset and the first batch again."""
    graph = lib.Graph()
    with graph.as_default():
        labels, probabilities, _, metrics = build(lib, cluster, placement)
        values = {k: value for k, (value, _) in metrics.items()}
        updates = {k: update for k, (_, update) in metrics.items()}
        out = []
        with lib.Session(target, graph=graph) as session:
            session.run(lib.local_variables_initializer())
            for y, p in batches():
                session.run(updates, {labels: y, probabilities: p})
                out.append(session.run(values))
            session.run(lib.local_variables_initializer())
            out.append(session.run(values))
            y, p = batches()[0]
            session.run(updates, {labels: y, probabilities: p})
            out.append(session.run(values))
        return out


@pytest.mark.parametrize("placement", ["replica_device_setter", "worker"])
def test_metrics_stream_on_a_cluster_as_tensorflow_places_and_computes_them(placement: str, tmp_path: Any,
                                                                           tf1: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        placed = devices(tf, cluster.cluster, placement)
        assert placed == devices(tf1, tf1.train.ClusterSpec(cluster.cluster), placement)
        expected_task = "/job:ps/task:0" if placement == "replica_device_setter" else WORKER
        assert placed and set(placed.values()) == {expected_task}
        ours = stream(tf, cluster.target("worker"), cluster.cluster, placement)
    theirs = stream(tf1, "", None, "none")
    assert len(ours) == len(theirs) == len(batches()) + 2
    for i, (mine, reference) in enumerate(zip(ours, theirs)):
        for key in reference:
            np.testing.assert_allclose(mine[key], reference[key], rtol=2e-5, atol=1e-6, err_msg=f"{key} at {i}")
    assert ours[-2] == {"accuracy": 0.0, "auc": 0.0, "recall": 0.0}, "reset on the task holding the variables"
    np.testing.assert_allclose(list(ours[-1].values()), list(ours[0].values()), rtol=1e-6)
