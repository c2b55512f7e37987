"""``tf.nn.nce_loss``, ``tf.nn.sampled_softmax_loss``, the candidate samplers and
``tf.nn.compute_accidental_hits`` against TensorFlow 2.21's ``tf.compat.v1`` (issue 24).

The samplers' random streams differ (numpy's, not TensorFlow's Philox), so the losses are
compared with the same ``sampled_values`` given to both libraries; the samplers themselves by
their ranges, shapes, uniqueness and expected-count formula.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

RNG = np.random.default_rng(7)
WEIGHTS = RNG.normal(size=(20, 4)).astype(np.float32)
BIASES = RNG.normal(size=20).astype(np.float32)
INPUTS = RNG.normal(size=(3, 4)).astype(np.float32)
LABELS = np.array([[1, 3], [5, 5], [7, 0]], np.int64)  # a repeated label, and 3, 5 and 0 also sampled
SAMPLED = (np.array([3, 9, 0, 12, 5], np.int64), RNG.random((3, 2)).astype(np.float32) + 0.1,
           RNG.random(5).astype(np.float32) + 0.1)


def loss_and_gradients(lib: Any, loss_fn: str, shards: int, **kwargs: Any) -> tuple[list[Any], list[str]]:
    """The loss and its gradients w.r.t. the weights (each shard), biases and inputs, densified;
    and the class names of the gradients."""
    with lib.Graph().as_default():
        if shards == 1:
            weights: Any = lib.Variable(WEIGHTS)
            weight_list = [weights]
        else:
            strategy = kwargs.get("partition_strategy", "mod")
            rows = [np.arange(20)[i::shards] for i in range(shards)] if strategy == "mod" else \
                np.array_split(np.arange(20), shards)
            weight_list = [lib.Variable(WEIGHTS[r]) for r in rows]
            weights = weight_list
        biases = lib.Variable(BIASES)
        inputs = lib.constant(INPUTS)
        sampled_values = tuple(lib.constant(v) for v in SAMPLED)
        loss = getattr(lib.nn, loss_fn)(weights, biases, lib.constant(LABELS), inputs, 5, 20, num_true=2,
                                        sampled_values=sampled_values, **kwargs)
        grads = lib.gradients(lib.reduce_sum(loss), weight_list + [biases, inputs])
        kinds = ["IndexedSlices" if isinstance(g, lib.IndexedSlices) else "dense" for g in grads]
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            return sess.run([loss] + [lib.convert_to_tensor(g) for g in grads]), kinds


@pytest.mark.parametrize("loss_fn", ["nce_loss", "sampled_softmax_loss"])
@pytest.mark.parametrize("remove_accidental_hits", [False, True])
@pytest.mark.parametrize("shards, strategy", [(1, "mod"), (2, "mod"), (3, "div")])
def test_losses_and_gradients_equal_tensorflow_s(tf1: Any, loss_fn: str, remove_accidental_hits: bool, shards: int,
                                                 strategy: str) -> None:
    kwargs = {"remove_accidental_hits": remove_accidental_hits, "partition_strategy": strategy}
    ours, our_kinds = loss_and_gradients(tensorgrid, loss_fn, shards, **kwargs)
    theirs, their_kinds = loss_and_gradients(tf1, loss_fn, shards, **kwargs)
    assert our_kinds == their_kinds == ["IndexedSlices"] * (shards + 1) + ["dense"]
    assert ours[0].shape == (3,)
    for mine, oracle in zip(ours, theirs):
        np.testing.assert_allclose(mine, oracle, rtol=1e-5, atol=1e-5)


def test_the_default_losses_sample_their_own_classes_and_train() -> None:
    with tensorgrid.Graph().as_default():
        tensorgrid.set_random_seed(3)
        weights = tensorgrid.Variable(WEIGHTS)
        biases = tensorgrid.Variable(BIASES)
        losses = [tensorgrid.reduce_mean(fn(weights, biases, LABELS[:, :1], INPUTS, 4, 20))
                  for fn in (tensorgrid.nn.nce_loss, tensorgrid.nn.sampled_softmax_loss)]
        train = tensorgrid.train.GradientDescentOptimizer(0.5).minimize(tensorgrid.add_n(losses))
        with tensorgrid.Session() as sess:
            sess.run(tensorgrid.global_variables_initializer())
            first = sum(sess.run(losses))
            for _ in range(50):
                sess.run(train)
            assert sum(sess.run(losses)) < first


def samples(lib: Any, sampler: Callable[..., Any], true_classes: Any, **kwargs: Any) -> Any:
    with lib.Graph().as_default():
        values = sampler(lib)(lib.constant(true_classes), **kwargs)
        assert values.sampled_candidates.dtype == lib.int64
        assert values.true_expected_count.shape.as_list() == list(np.shape(true_classes))
        with lib.Session() as sess:
            return sess.run(values)


SAMPLERS = {"log_uniform": lambda lib: lib.nn.log_uniform_candidate_sampler,
            "random.log_uniform": lambda lib: lib.random.log_uniform_candidate_sampler,
            "uniform": lambda lib: lib.nn.uniform_candidate_sampler}


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
@pytest.mark.parametrize("lib_name", ["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def test_a_sampler_s_ids_and_expected_counts(request: pytest.FixtureRequest, lib_name: str, sampler: str) -> None:
    lib = tensorgrid if lib_name == "tensorgrid" else request.getfixturevalue("tf1")
    every_class = np.arange(50, dtype=np.int64).reshape(25, 2)
    drawn = samples(lib, SAMPLERS[sampler], every_class, num_true=2, num_sampled=30, unique=False, range_max=50)
    assert drawn.sampled_candidates.shape == (30,) and drawn.sampled_candidates.min() >= 0
    assert drawn.sampled_candidates.max() < 50
    probability = (np.log((every_class + 2.0) / (every_class + 1.0)) / np.log(51.0)) if "log" in sampler \
        else np.full(every_class.shape, 1 / 50)
    # without unique: p * num_sampled
    np.testing.assert_allclose(drawn.true_expected_count, probability * 30, rtol=1e-5)
    distinct = samples(lib, SAMPLERS[sampler], every_class, num_true=2, num_sampled=40, unique=True, range_max=50)
    assert len(set(distinct.sampled_candidates.tolist())) == 40
    # with unique: 1 - (1 - p) ** tries, for one number of tries (>= num_sampled) for every class
    # (classes expected about once are left out: their count rounds to 1 in float32)
    informative = distinct.true_expected_count < 0.99
    tries = np.log1p(-distinct.true_expected_count[informative]) / np.log1p(-probability[informative])
    assert tries.min() >= 40 - 1e-3 and np.ptp(tries) < 1e-2 * tries.max()
    sampled_p = probability.reshape(-1)[distinct.sampled_candidates]
    np.testing.assert_allclose(distinct.sampled_expected_count, -np.expm1(tries.mean() * np.log1p(-sampled_p)),
                               rtol=1e-2)


def test_the_same_class_s_expected_counts_equal_tensorflow_s(tf1: Any) -> None:
    classes = np.array([[0, 1, 2], [7, 99, 1000]], np.int64)
    for name in ("log_uniform", "uniform"):
        ours, theirs = (samples(lib, SAMPLERS[name], classes, num_true=3, num_sampled=8, unique=False,
                                range_max=1001) for lib in (tensorgrid, tf1))
        np.testing.assert_allclose(ours.true_expected_count, theirs.true_expected_count, rtol=1e-6)


def test_too_few_classes_for_unique_samples_fails_as_tensorflow(tf1: Any) -> None:
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            values = lib.nn.log_uniform_candidate_sampler(lib.constant([[1]], lib.int64), 1, 6, True, 5)
            with lib.Session() as sess, pytest.raises(lib.errors.InvalidArgumentError):
                sess.run(values)


def test_accidental_hits_equal_tensorflow_s(tf1: Any) -> None:
    results = []
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            hits = lib.nn.compute_accidental_hits(lib.constant([[3, 3], [1, 5], [2, 4]], lib.int64),
                                                  lib.constant([5, 3, 3, 7], lib.int64), num_true=2)
            with lib.Session() as sess:
                results.append(sess.run(hits))
    for mine, oracle in zip(*results):
        assert mine.dtype == oracle.dtype
        np.testing.assert_array_equal(mine, oracle)
