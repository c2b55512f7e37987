"""Adam (lazy, as DeepRec's AdamAsync) and FTRL on embedding variables, against TensorFlow 2.21.

The oracle is the same training on a fixed ``[vocab, dim]`` variable with TF1's optimizers, ids
mapping 1:1 to rows: FTRL's sparse update touches only the rows of the batch in TF too, so any
batches compare; TF1's Adam moves every row each step, so its batches hold every id (then lazy and
dense Adam agree), and the laziness itself is checked against numpy."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

VOCAB, DIM = 5, 3
INITIAL = (np.arange(VOCAB * DIM, dtype=np.float32).reshape(VOCAB, DIM) - 7) / 10
WEIGHTS = np.linspace(-1.0, 1.5, 7 * DIM, dtype=np.float32).reshape(7, DIM)
EVERY_ID = [[0, 1, 2, 3, 4, 4, 0], [4, 3, 2, 1, 0, 2, 2], [1, 0, 3, 2, 4, 1, 1]]
SOME_IDS = [[0, 2, 2, 4, 4, 4, 1], [3, 3, 0, 0, 1, 1, 1], [2, 4, 2, 4, 0, 0, 0]]


def _loss(lib: Any, rows: Any) -> Any:
    return lib.reduce_sum(rows * rows * WEIGHTS) + lib.reduce_sum(rows * WEIGHTS)


def _train_fixed(tf1: Any, make_optimizer: Callable[[Any], Any], batches: list[list[int]]) -> np.ndarray:
    with tf1.Graph().as_default():
        table = tf1.get_variable("emb", initializer=INITIAL)
        ids = tf1.placeholder(tf1.int64, [7])
        train = make_optimizer(tf1).minimize(_loss(tf1, tf1.nn.embedding_lookup(table, ids)))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for batch in batches:
                sess.run(train, {ids: batch})
            return sess.run(table)


def _train_table(make_optimizer: Callable[[Any], Any], batches: list[list[int]], parts: int = 0,
                 save_to: Any = None) -> np.ndarray:
    with tf.Graph().as_default():
        option = tf.EmbeddingVariableOption(init_option=tf.InitializerOption(
            tf.constant_initializer(INITIAL), default_value_dim=VOCAB))
        ev = tf.get_embedding_variable("emb", DIM, ev_option=option,
                                       partitioner=tf.fixed_size_partitioner(parts) if parts else None)
        ids = tf.placeholder(tf.int64, [7])
        train = make_optimizer(tf).minimize(_loss(tf, tf.nn.embedding_lookup(ev, ids)))
        everything = tf.nn.embedding_lookup(ev, tf.range(VOCAB, dtype=tf.int64))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in batches:
                sess.run(train, {ids: batch})
            if save_to is not None:
                tf.train.Saver().save(sess, str(save_to))
            return sess.run(everything)


OPTIMIZERS: dict[str, tuple[Callable[[Any], Any], list[list[int]]]] = {
    "adam": (lambda lib: lib.train.AdamOptimizer(0.05, beta1=0.8, beta2=0.9, epsilon=1e-3), EVERY_ID),
    "ftrl": (lambda lib: lib.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01,
                                                 l2_regularization_strength=0.02), SOME_IDS),
    "ftrl with l2 shrinkage and a learning rate power": (
        lambda lib: lib.train.FtrlOptimizer(0.2, learning_rate_power=-0.7, initial_accumulator_value=0.3,
                                            l1_regularization_strength=0.05,
                                            l2_shrinkage_regularization_strength=0.1), SOME_IDS),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_rows_match_tf1_optimizers_on_a_fixed_table(tf1: Any, name: str) -> None:
    make_optimizer, batches = OPTIMIZERS[name]
    expected = _train_fixed(tf1, make_optimizer, batches)
    np.testing.assert_allclose(_train_table(make_optimizer, batches), expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(_train_table(make_optimizer, batches, parts=2), expected, rtol=2e-5, atol=2e-6)


def test_adam_is_lazy_moving_only_the_ids_of_the_batch() -> None:
    lr, beta1, beta2, epsilon = 0.05, 0.8, 0.9, 1e-3
    batches = [[0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]]
    got = _train_table(lambda lib: lib.train.AdamOptimizer(lr, beta1, beta2, epsilon), batches)
    values = INITIAL.astype(np.float64).copy()
    m, v = np.zeros_like(values), np.zeros_like(values)
    for step, batch in enumerate(batches, start=1):
        rows = values[batch]
        grads = np.zeros_like(values)
        np.add.at(grads, batch, 2 * rows * WEIGHTS + WEIGHTS)
        alpha = lr * np.sqrt(1 - beta2**step) / (1 - beta1**step)
        for key in sorted(set(batch)):
            m[key] = beta1 * m[key] + (1 - beta1) * grads[key]
            v[key] = beta2 * v[key] + (1 - beta2) * grads[key] ** 2
            values[key] -= alpha * m[key] / (np.sqrt(v[key]) + epsilon)
    np.testing.assert_allclose(got, values, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(got[2:], INITIAL[2:])  # never looked up: never stored, never moved


@pytest.mark.parametrize("make_optimizer, slots", [
    (lambda lib: lib.train.AdamOptimizer(0.1), ["emb/Adam-values", "emb/Adam_1-values"]),
    (lambda lib: lib.train.FtrlOptimizer(0.1), ["emb/Ftrl-values", "emb/Ftrl_1-values"]),
])
def test_slots_are_saved_per_key(tmp_path: Any, make_optimizer: Callable[[Any], Any], slots: list[str]) -> None:
    _train_table(make_optimizer, SOME_IDS[:1], save_to=tmp_path / "ckpt")
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt"))
    keys = reader.get_tensor("emb-keys")
    np.testing.assert_array_equal(keys, [0, 1, 2, 4])
    for slot in slots:
        assert reader.get_tensor(slot).shape == (4, DIM)
