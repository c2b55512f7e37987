"""A bounded, visible embedding table: ``max_entries`` evicts the least recently updated keys, and each
table's entries and bytes (keys, values, slots) are gauges on its task's metrics page."""

from __future__ import annotations

import urllib.request
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.distributed.rpc import ports


def _bounded_model(max_entries: int) -> tuple[Any, Any, Any, Any]:
    option = tf.EmbeddingVariableOption(max_entries=max_entries)
    ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5), ev_option=option)
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(ev, ids)
    train = tf.train.AdagradOptimizer(0.1).minimize(tf.reduce_sum(rows))
    return ev, ids, rows, train


def test_max_entries_evicts_the_least_recently_updated_keys(tmp_path: Any) -> None:
    with tf.Graph().as_default():
        ev, ids, rows, train = _bounded_model(3)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: [1, 2, 3]})  # three keys stored, none updated
            sess.run(train, {ids: [3, 1]})  # 3 and 1 updated: 2 is now the least recently updated
            sess.run(rows, {ids: [4]})  # a fourth key: 2 goes
            assert sess.run(ev.total_count()) == 3
            sess.run(train, {ids: [3]})
            # Two more: 1 (last updated before 4 was stored) and 4 (stored before 3's last update) go.
            sess.run(rows, {ids: [5, 6]})
            path = tf.train.Saver().save(sess, str(tmp_path / "ckpt"))
    np.testing.assert_array_equal(tf.train.load_checkpoint(path).get_tensor("emb-keys"), [3, 5, 6])


def test_bad_max_entries_names_the_value() -> None:
    with pytest.raises(ValueError, match="max_entries must be None or an int > 0, got 0"):
        tf.EmbeddingVariableOption(max_entries=0)


def _gauge(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not in metrics:\n{text}")


def test_entries_and_bytes_per_table_are_gauges_on_the_metrics_page() -> None:
    port, metrics_port = ports.free_ports(2)
    server = tf.train.Server({"local": [f"localhost:{port}"]}, "local", 0, metrics_port=metrics_port)
    try:
        with tf.Graph().as_default() as graph:
            ev, ids, rows, train = _bounded_model(1000)
            with tf.Session(server.target, graph=graph) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(train, {ids: np.arange(100, dtype=np.int64) * 2**33})
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        server.stop()
    assert _gauge(text, "tensorgrid_embedding_table_entries", table="emb") == 100
    values = _gauge(text, "tensorgrid_embedding_table_bytes", table="emb", kind="values")
    slots = _gauge(text, "tensorgrid_embedding_table_bytes", table="emb", kind="slots")
    keys = _gauge(text, "tensorgrid_embedding_table_bytes", table="emb", kind="keys")
    assert values >= 100 * 2 * 4 and slots >= 100 * 2 * 4 and keys >= 100 * 8
