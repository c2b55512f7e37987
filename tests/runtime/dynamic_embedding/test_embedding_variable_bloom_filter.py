"""Admission by a counting Bloom filter (DeepRec's ``tf.CBFFilter``): the same admissions as a counter
filter while keys do not collide, memory fixed whatever the number of rare ids, the counters in the
checkpoint (restored into the same or another part count), and its arguments checked.

DeepRec is not on PyPI, so there is no oracle: the semantics (DeepRec's docs) are checked directly."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.kernels import counting_bloom_filter
from tensorgrid.kernels import embedding_variable_kernels


def _bloom(filter_freq: int = 3, size: int = 10_000, probability: float = 0.001, counter_type: Any = tf.uint64) -> Any:
    return tf.CBFFilter(filter_freq=filter_freq, max_element_size=size, false_positive_probability=probability,
                        counter_type=counter_type)


def _model(name: str, filter_option: Any, parts: int = 0) -> tuple[Any, Any, Any, Any]:
    ev = tf.get_embedding_variable(name, 2, initializer=tf.constant_initializer(0.5),
                                   partitioner=tf.fixed_size_partitioner(parts) if parts else None,
                                   ev_option=tf.EmbeddingVariableOption(filter_option=filter_option))
    ids = tf.placeholder(tf.int64, [None], name=f"{name}_ids")
    return ev, ids, tf.nn.embedding_lookup(ev, ids), ev.total_count()


def test_sizing_is_deeprecs():
    assert counting_bloom_filter.counter_count(1000, 0.01) == math.ceil(abs(math.log(0.01)) / math.log(2) ** 2 * 1000)
    assert counting_bloom_filter.hash_function_count(0.01) == 7
    assert counting_bloom_filter.hash_function_count(0.9) == 1
    attrs = _bloom(size=2**30, probability=0.01).filter_attrs()
    assert attrs == {"cbf_num_counters": math.ceil(abs(math.log(0.01)) / math.log(2) ** 2 * 2**30),
                     "cbf_num_hash_functions": 7, "cbf_counter_type": "uint64"}


def test_admissions_are_a_counter_filters_while_keys_do_not_collide():
    rng = np.random.default_rng(7)
    batches = [rng.integers(-40, 40, size=12) * 2**40 + 3 for _ in range(15)]  # raw 64-bit ids, repeats in a batch
    with tf.Graph().as_default():
        by_filter = {"counter": _model("counter", tf.CounterFilter(filter_freq=3)), "bloom": _model("bloom", _bloom())}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in batches:
                (c_rows, c_count), (b_rows, b_count) = (sess.run([rows, count], {ids: batch})
                                                        for _, ids, rows, count in by_filter.values())
                np.testing.assert_array_equal(b_rows, c_rows)
                assert b_count == c_count
    assert 0 < c_count < 80  # some ids admitted, some still waiting


def test_a_batch_that_brings_a_key_to_filter_freq_reads_its_row_from_that_lookup_on():
    with tf.Graph().as_default():
        _, ids, rows, count = _model("emb", _bloom(filter_freq=2))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(rows, {ids: [9, 9, 9, 8]})[:, 0], [0.0, 0.5, 0.5, 0.0])
            assert sess.run(count) == 1


def test_memory_stays_fixed_however_many_rare_ids_arrive():
    def table(shape: tuple[int, int, str]) -> Any:
        made = embedding_variable_kernels.EmbeddingTable("emb", 4, np.float32, 2, 0, -1.0, 0.0,
                                                         bloom_filter_shape=shape)
        made.initialize(np.zeros((16, 4), np.float32))
        return made

    rare = np.arange(200_000, dtype=np.int64) * 7919  # each id seen once
    attrs = _bloom(filter_freq=2, size=len(rare), probability=0.01, counter_type=tf.uint8).filter_attrs()
    bloom = table((attrs["cbf_num_counters"], attrs["cbf_num_hash_functions"], attrs["cbf_counter_type"]))
    counter = table((0, 0, ""))
    before = sum(bloom.memory_bytes().values())
    for batch in np.split(rare, 10):
        bloom.gather(batch, count=True)
        counter.gather(batch, count=True)
    assert counter.size() == 0
    assert bloom.size() < 0.01 * len(rare)  # a false positive admits a key seen once: rarely
    assert sum(bloom.memory_bytes().values()) <= before + 16 * 8 * 0.01 * len(rare)  # only the few admitted rows
    assert bloom.memory_bytes()["filter"] == attrs["cbf_num_counters"]  # one byte per counter, ~9.6 per key
    assert counter.memory_bytes()["keys"] > 16 * len(rare) > 1.5 * bloom.memory_bytes()["filter"]


def test_false_positives_stay_near_the_probability_asked_for():
    size, probability = 20_000, 0.01
    bloom = counting_bloom_filter.CountingBloomFilter(counting_bloom_filter.counter_count(size, probability),
                                                      counting_bloom_filter.hash_function_count(probability), "uint8")
    seen = np.arange(size, dtype=np.int64) * 1_000_003
    bloom.add(seen, np.ones(size, np.int64))
    assert np.all(bloom.estimate(seen) >= 1)
    never_seen = -np.arange(1, size + 1, dtype=np.int64) * 7
    assert np.mean(bloom.estimate(never_seen) > 0) < 2 * probability


def test_counters_saturate_at_their_type_instead_of_wrapping():
    bloom = counting_bloom_filter.CountingBloomFilter(100, 3, "uint8")
    bloom.add(np.array([5], np.int64), np.array([200]))
    bloom.add(np.array([5], np.int64), np.array([200]))
    assert bloom.estimate(np.array([5], np.int64))[0] == 255


@pytest.mark.parametrize("saved_parts,restored_parts", [(0, 0), (2, 2), (2, 3), (0, 2)])
def test_counts_of_keys_not_yet_admitted_survive_a_checkpoint(tmp_path, saved_parts, restored_parts):
    waiting = np.array([11, 2**50, -3, 4000], np.int64)
    with tf.Graph().as_default():
        _, ids, rows, count = _model("emb", _bloom(), saved_parts)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: np.concatenate([waiting, waiting, [77, 77, 77]])})
            assert sess.run(count) == 1
            path = saver.save(sess, str(tmp_path / "model"))
    with tf.Graph().as_default():
        _, ids, rows, count = _model("emb", _bloom(), restored_parts)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, path)
            assert sess.run(count) == 1
            np.testing.assert_array_equal(sess.run(rows, {ids: waiting})[:, 0], np.full(4, 0.5))  # the third lookup
            assert sess.run(count) == 5


def test_the_counters_are_in_the_checkpoint_under_the_tables_name(tmp_path):
    with tf.Graph().as_default():
        _, ids, rows, _ = _model("emb", _bloom(size=100, probability=0.1))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: [1, 2, 2]})
            path = saver.save(sess, str(tmp_path / "model"))
    reader = tf.train.NewCheckpointReader(path)
    counters = reader.get_tensor("emb-cbf_counters")
    assert counters.dtype == np.int64 and len(counters) == counting_bloom_filter.counter_count(100, 0.1)
    assert counters.sum() == 3 * counting_bloom_filter.hash_function_count(0.1)
    assert len(reader.get_tensor("emb-keys_filtered")) == 0  # no per-key record of waiting keys


def test_a_counter_filters_checkpoint_fills_the_bloom_filter(tmp_path):
    with tf.Graph().as_default():
        _, ids, rows, _ = _model("emb", tf.CounterFilter(filter_freq=3))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: [5, 5, 6]})
            path = saver.save(sess, str(tmp_path / "model"))
    with tf.Graph().as_default():
        _, ids, rows, count = _model("emb", _bloom())
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(rows, {ids: [5, 6]})[:, 0], [0.5, 0.0])
            assert sess.run(count) == 1


def test_deeprecs_default_cbf_filter_is_a_counter_filter():
    option = tf.CBFFilter(filter_freq=2)
    assert option.filter_attrs()["cbf_num_counters"] == 0
    with tf.Graph().as_default():
        ev, ids, rows, count = _model("emb", option)
        assert ev.bloom_filter_counters == 0
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(rows, {ids: [4, 4]})[:, 0], [0.0, 0.5])


@pytest.mark.parametrize("kwargs,named", [
    ({"filter_freq": -1}, "filter_freq must be an int >= 0, got -1"),
    ({"max_element_size": 10, "false_positive_probability": 1.5}, r"false_positive_probability must be in \(0, 1\)"),
    ({"max_element_size": 10, "false_positive_probability": 0.0}, r"false_positive_probability must be in \(0, 1\)"),
    ({"false_positive_probability": 0.01}, r"max_element_size must be > 0 when false_positive_probability is set"),
    ({"max_element_size": 10}, "max_element_size=10 needs a false_positive_probability"),
    ({"max_element_size": -5, "false_positive_probability": 0.1}, "max_element_size must be an int >= 0, got -5"),
    ({"max_element_size": 10, "false_positive_probability": 0.1, "counter_type": tf.float32},
     "counter_type must be one of tf.uint8, .*got tf.float32"),
    ({"false_positive_probability": "low"}, "false_positive_probability must be a number, got 'low'"),
])
def test_bad_arguments_are_named(kwargs, named):
    with pytest.raises(ValueError, match=named):
        tf.CBFFilter(**kwargs)


def test_a_restore_with_a_filter_of_another_size_is_refused_by_the_table():
    table = embedding_variable_kernels.EmbeddingTable("emb", 2, np.float32, 2, 0, -1.0, 0.0,
                                                      bloom_filter_shape=(50, 2, "uint32"))
    empty = np.zeros(0, np.int64)
    arrays = [empty, np.zeros((0, 2), np.float32), empty, empty, empty, empty, np.zeros(7, np.int64)]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Bloom filter has 50 counters, the checkpoint's has 7"):
        table.restore(np.zeros((4, 2), np.float32), arrays, [], [])
