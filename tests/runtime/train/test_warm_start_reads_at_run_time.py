"""Warm-start values are read from the checkpoint when the initializer runs (``train/warm_start_reads.py``).

With TensorFlow 2.21 as the oracle: a checkpoint rewritten between ``warm_start`` and the initializer
gives its new values on both libraries, for a variable taken as it is, a partitioned one and one
remapped by vocabulary. tensorgrid only: the table is not in the graph (the meta graph a Saver writes
stays small), a checkpoint whose tensor changed shape fails naming the variable, and on a cluster the
value read on the client's task reaches the variable on its PS process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(120)

ROWS, WIDTH = 4096, 64


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def save(tf: Any, prefix: Path, table: np.ndarray) -> str:
    """A checkpoint holding ``table`` as ``embedding`` (rewritten in place when called again)."""
    with tf.Graph().as_default(), tf.Session() as session:
        tf.get_variable("embedding", initializer=table)
        session.run(tf.global_variables_initializer())
        return str(tf.train.Saver().save(session, str(prefix)))


def table(offset: float, rows: int = 4) -> np.ndarray:
    return np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) + offset


def initialized_embedding(tf: Any, embedding: Any) -> np.ndarray:
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        value = embedding.as_tensor() if not isinstance(embedding, tf.Variable) else embedding
        return np.asarray(session.run(value))


@pytest.mark.parametrize("partitioned", [False, True])
def test_a_checkpoint_rewritten_after_the_call_gives_its_new_values(lib: Any, tmp_path: Path,
                                                                  partitioned: bool) -> None:
    tf = lib
    prefix = tmp_path / "model.ckpt"
    checkpoint = save(tf, prefix, table(0.0))
    with tf.Graph().as_default():
        partitioner = tf.fixed_size_partitioner(2) if partitioned else None
        embedding = tf.get_variable("embedding", [4, 2], initializer=tf.zeros_initializer(), partitioner=partitioner)
        tf.train.warm_start(checkpoint, vars_to_warm_start=".*")
        save(tf, prefix, table(100.0))
        np.testing.assert_allclose(initialized_embedding(tf, embedding), table(100.0))


def test_a_remapped_variable_reads_the_rewritten_checkpoint_too(lib: Any, tmp_path: Path) -> None:
    tf = lib
    prefix = tmp_path / "model.ckpt"
    checkpoint = save(tf, prefix, table(0.0))
    (tmp_path / "old_vocab.txt").write_text("apple\nbanana\ncherry\ndate\n")
    (tmp_path / "new_vocab.txt").write_text("date\nfig\nbanana\n")
    vocab_info = tf.train.VocabInfo(new_vocab=str(tmp_path / "new_vocab.txt"), new_vocab_size=3, num_oov_buckets=1,
                                    old_vocab=str(tmp_path / "old_vocab.txt"))
    with tf.Graph().as_default():
        embedding = tf.get_variable("embedding", [4, 2], initializer=tf.zeros_initializer())
        tf.train.warm_start(checkpoint, vars_to_warm_start=None, var_name_to_vocab_info={"embedding": vocab_info})
        save(tf, prefix, table(100.0))
        rewritten = table(100.0)
        np.testing.assert_allclose(initialized_embedding(tf, embedding),
                                   [rewritten[3], [0.0, 0.0], rewritten[1], [0.0, 0.0]])


def test_the_table_is_not_in_the_graph(tmp_path: Path) -> None:
    tf = tensorgrid
    big = np.random.default_rng(0).standard_normal((ROWS, WIDTH)).astype(np.float32)  # 1 MiB
    checkpoint = save(tf, tmp_path / "model.ckpt", big)
    sizes = {}
    for warm in (False, True):
        with tf.Graph().as_default():
            embedding = tf.get_variable("embedding", [ROWS, WIDTH], initializer=tf.zeros_initializer())
            if warm:
                tf.train.warm_start(checkpoint)
            meta = str(tmp_path / f"graph-{warm}.meta")
            tf.train.export_meta_graph(meta)
            sizes[warm] = os.path.getsize(meta)
            if warm:
                np.testing.assert_array_equal(initialized_embedding(tf, embedding), big)
    assert sizes[True] - sizes[False] < 64 * 1024, sizes  # the table is 1 MiB


def test_a_tensor_that_changed_shape_since_the_call_fails_naming_the_variable(tmp_path: Path) -> None:
    tf = tensorgrid
    prefix = tmp_path / "model.ckpt"
    checkpoint = save(tf, prefix, table(0.0))
    with tf.Graph().as_default():
        tf.get_variable("embedding", [4, 2], initializer=tf.zeros_initializer())
        tf.train.warm_start(checkpoint)
        save(tf, prefix, table(0.0, rows=6))
        with tf.Session() as session:
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"embedding.*shape \[6, 2\] for a variable of shape \[4, 2\]"):
                session.run(tf.global_variables_initializer())


def test_on_a_cluster_the_value_read_by_the_client_reaches_the_ps(tmp_path: Path) -> None:
    tf = tensorgrid
    checkpoint = save(tf, tmp_path / "model.ckpt", table(7.0))
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False) as cluster:
        cluster.task("ps").start()
        server = tf.train.Server(cluster.cluster, job_name="worker", task_index=0)
        try:
            with tf.Graph().as_default():
                with tf.device(tf.train.replica_device_setter(cluster=cluster.cluster)):
                    embedding = tf.get_variable("embedding", [4, 2], initializer=tf.zeros_initializer())
                    tf.train.warm_start(checkpoint)
                assert embedding.device.startswith("/job:ps")
                with tf.Session(server.target) as session:
                    session.run(tf.global_variables_initializer())
                    np.testing.assert_allclose(session.run(embedding), table(7.0))
        finally:
            server.stop()
