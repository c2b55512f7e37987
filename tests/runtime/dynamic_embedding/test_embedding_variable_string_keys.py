"""Embedding variables keyed by strings (``key_dtype=tf.string``): each string is hashed once, where the
lookup is built, to its 64-bit FarmHash ``Fingerprint64`` (TensorFlow 2.21's ``tf.fingerprint`` is the
oracle for the keys), and the table, its gradients and its checkpoints hold those int64 keys."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.ops import embedding_variable_ops

WORDS = ["paris", "", "a much longer string than sixteen bytes, and over sixty-four bytes long as well!", "oslo",
         "paris"]


def _fingerprints(tf1: Any, words: list[str]) -> np.ndarray:
    """TensorFlow's Fingerprint64 of each word, its 8 bytes read as an int64."""
    with tf1.Graph().as_default(), tf1.Session() as sess:
        as_bytes = sess.run(tf1.fingerprint(tf1.constant(words)))
    return np.frombuffer(as_bytes.tobytes(), "<i8")


@pytest.mark.oracle
def test_string_keys_are_tensorflows_64_bit_fingerprints_in_lookups_and_checkpoints(tf1, tmp_path):
    expected_keys = _fingerprints(tf1, WORDS)
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("words", 2, key_dtype=tf.string, initializer=tf.constant_initializer(0.5))
        words = tf.placeholder(tf.string, [None])
        rows = tf.nn.embedding_lookup(ev, words)
        train = tf.train.GradientDescentOptimizer(1.0).minimize(tf.reduce_sum(rows))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {words: WORDS})
            np.testing.assert_allclose(sess.run(rows, {words: WORDS}),
                                       [[-1.5, -1.5], [-0.5, -0.5], [-0.5, -0.5], [-0.5, -0.5], [-1.5, -1.5]])
            path = saver.save(sess, str(tmp_path / "ckpt"))
    reader = tf.train.load_checkpoint(path)
    np.testing.assert_array_equal(reader.get_tensor("words-keys"), np.unique(expected_keys))
    np.testing.assert_array_equal(reader.get_tensor("words-freqs")[np.searchsorted(np.unique(expected_keys),
                                                                                   expected_keys[0])], 4)


def test_a_string_table_gives_what_an_int64_table_gives_for_the_hashed_keys():
    with tf.Graph().as_default():
        words = tf.placeholder(tf.string, [None])
        by_string = tf.get_embedding_variable("s", 3, key_dtype=tf.string, initializer=tf.constant_initializer(0.25),
                                              partitioner=tf.fixed_size_partitioner(3))
        by_key = tf.get_embedding_variable("k", 3, initializer=tf.constant_initializer(0.25),
                                           partitioner=tf.fixed_size_partitioner(3))
        keys = tf.placeholder(tf.int64, [None])
        sparse_words = tf.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 1], [2, 2]], words, [3, 3])
        sparse_keys = tf.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 1], [2, 2]], keys, [3, 3])
        outputs = [tf.nn.embedding_lookup_sparse(by_string, sparse_words, None, combiner="sqrtn"),
                   tf.nn.embedding_lookup_sparse(by_key, sparse_keys, None, combiner="sqrtn")]
        loss = tf.reduce_sum(tf.square(outputs[0])) + tf.reduce_sum(tf.square(outputs[1]))
        train = tf.train.AdamOptimizer(0.1).minimize(loss)
        hashed = embedding_variable_ops.string_keys(words)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            feed = {words: WORDS, keys: sess.run(hashed, {words: WORDS})}
            for _ in range(3):
                sess.run(train, feed)
            got_strings, got_keys = sess.run(outputs, feed)
            counts = sess.run([by_string.total_count(), by_key.total_count()])
    np.testing.assert_allclose(got_strings, got_keys, rtol=1e-6)
    assert counts == [4, 4]


def test_string_tables_refuse_integer_ids_and_key_dtypes_are_checked():
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("s", 2, key_dtype=tf.string)
        with pytest.raises(TypeError, match="key_dtype string: its ids must be strings, got int64"):
            tf.nn.embedding_lookup(ev, tf.constant([1, 2], tf.int64))
        ints = tf.get_embedding_variable("i", 2)
        with pytest.raises(TypeError, match="ids must be int64 or int32, got string"):
            tf.nn.embedding_lookup(ints, tf.constant(["a"]))
        with pytest.raises(ValueError, match="key_dtype must be tf.int64, tf.int32 or tf.string, got float32"):
            tf.get_embedding_variable("f", 2, key_dtype=tf.float32)


def test_strings_are_hashed_on_the_worker_so_only_int64_keys_reach_the_ps():
    spec = tf.train.ClusterSpec({"ps": ["ps0:1", "ps1:1"], "worker": ["w0:1"]})
    with tf.Graph().as_default() as graph:
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            ev = tf.get_embedding_variable("s", 2, key_dtype=tf.string, partitioner=tf.fixed_size_partitioner(2))
            words = tf.placeholder(tf.string, [None])
            rows = tf.nn.embedding_lookup(ev, words)
    hashes = [op for op in graph.get_operations() if op.type == "KvStringToKey"]
    gathers = [op for op in graph.get_operations() if op.type == "KvResourceGather"]
    assert len(hashes) == 1 and hashes[0].device == "/job:worker"
    assert sorted(op.device for op in gathers) == ["/job:ps/task:0", "/job:ps/task:1"]
    assert all(op.inputs[1].dtype == tf.int64 for op in gathers)
    assert rows.shape.as_list() == [None, 2]
