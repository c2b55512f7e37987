"""FTRL and ProximalAdagrad on real parameter servers, against TF1.

Two ``tensorgrid server`` processes are the PS tasks: they hold an embedding table
partitioned in two (one part on each), a dense weight and their slots
(``replica_device_setter``), and run their fused updates; a worker process's master runs
the steps. The table's gradient reaches each PS as an IndexedSlices of its part, with
repeated ids, so only the looked-up rows move. The variables and slots read back from the
PS tasks must equal ``tf.compat.v1`` running the same graph in one process.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)

ROWS, DIM = 50, 4
INITIAL = ((np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) % 13) / 13.0 - 0.5).astype(np.float32)
BATCHES = [np.array([[3, 40], [25, 3]]), np.array([[7, 7], [40, 12]]), np.array([[49, 0], [3, 12]])]
TOUCHED = sorted({int(i) for batch in BATCHES for i in batch.reshape(-1)})
OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "ftrl": lambda lib: lib.train.FtrlOptimizer(0.5, l1_regularization_strength=0.01, l2_regularization_strength=0.1,
                                                l2_shrinkage_regularization_strength=0.05),
    "ftrl_power_0": lambda lib: lib.train.FtrlOptimizer(0.2, learning_rate_power=0.0, l1_regularization_strength=0.02),
    "proximal_adagrad": lambda lib: lib.train.ProximalAdagradOptimizer(0.3, l1_regularization_strength=0.01,
                                                                       l2_regularization_strength=0.05),
}


def train(lib: Any, optimizer: str, target: str, cluster: Any) -> tuple[dict[str, np.ndarray], list[str]]:
    """The variables and slots after one step per batch, and the devices of the update ops."""
    graph = lib.Graph()
    with graph.as_default():
        with lib.device(lib.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
            emb = lib.get_variable(f"{optimizer}_emb", initializer=lib.constant(INITIAL),
                                   partitioner=lib.fixed_size_partitioner(2))
            w = lib.get_variable(f"{optimizer}_w", [DIM, 1], initializer=lib.constant_initializer(0.25))
            ids = lib.placeholder(lib.int64, [None, 2], name="ids")
            pooled = lib.reduce_sum(lib.nn.embedding_lookup(emb, ids), 1)
            loss = lib.reduce_mean(lib.square(lib.matmul(pooled, w) - 1.0))
            opt = OPTIMIZERS[optimizer](lib)
            step = opt.minimize(loss)
        parts = {f"emb/part_{i}": part for i, part in enumerate(emb)}
        fetches = {**parts, "w": w, **{f"{key}/{name}": opt.get_slot(v, name)
                                        for key, v in (*parts.items(), ("w", w)) for name in opt.get_slot_names()}}
        devices = sorted({op.device for op in graph.get_operations() if "Apply" in op.type})
        with lib.Session(target, graph=graph) as sess:
            sess.run(lib.global_variables_initializer())
            for batch in BATCHES:
                sess.run(step, {ids: batch})
            return sess.run(fetches), devices


def test_updates_run_on_the_parameter_servers_and_match_tensorflow(tmp_path: Any, tf1: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 2, "worker": 1}) as cluster:
        remote = {name: train(tf, name, cluster.target("worker"), cluster.cluster) for name in OPTIMIZERS}
    for name, (values, devices) in remote.items():
        assert devices == ["/job:ps/task:0", "/job:ps/task:1"], name
        theirs, _ = train(tf1, name, "", None)
        assert sorted(values) == sorted(theirs), name
        for key in theirs:
            np.testing.assert_allclose(values[key], theirs[key], rtol=2e-5, atol=2e-6, err_msg=f"{name}: {key}")
        # The parts hold the table's halves; embedding_lookup's "mod" strategy finds id i in part i % 2, row i // 2.
        table = np.concatenate([values["emb/part_0"], values["emb/part_1"]])
        touched = [(i % 2) * (ROWS // 2) + i // 2 for i in TOUCHED]
        untouched = np.setdiff1d(np.arange(ROWS), touched)
        np.testing.assert_array_equal(table[untouched], INITIAL[untouched])
        assert not np.allclose(table[touched], INITIAL[touched])
