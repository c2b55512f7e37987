"""Kernels of the candidate samplers behind ``tf.nn.nce_loss`` and ``tf.nn.sampled_softmax_loss``.

``LogUniformCandidateSampler`` and ``UniformCandidateSampler`` draw ``num_sampled`` class ids
from ``[0, range_max)`` and say how often each id (sampled or true) is expected among the
draws; ``ComputeAccidentalHits`` finds the sampled ids that are also a row's true classes.
The distributions, the count of tries under ``unique`` and the expected-count formula are
TensorFlow's (``core/kernels/range_sampler.cc``), computed in float32 as TensorFlow computes
them; the random stream is numpy's, not TensorFlow's Philox, so the ids drawn differ.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel


def _generator(k: context.KernelContext) -> np.random.Generator:
    """The op's own generator, kept across steps (seeded by its ``seed``/``seed2`` attributes)."""
    rng = k.state.get("rng")
    if rng is None:
        seed, seed2 = k.attrs["seed"], k.attrs["seed2"]
        rng = np.random.default_rng([seed, seed2] if (seed or seed2) else None)
        k.state["rng"] = rng
    return rng


def log_uniform_draws(rng: np.random.Generator, range_max: int, count: int) -> np.ndarray:
    """``count`` ids with P(k) = log((k + 2) / (k + 1)) / log(range_max + 1), as TF's LogUniformSampler."""
    values = np.exp(rng.random(count) * math.log1p(range_max)).astype(np.int64) - 1
    return values % range_max  # floating-point roundoff may reach range_max, as TF notes


def log_uniform_probability(ids: np.ndarray, range_max: int) -> np.ndarray:
    return (np.log((ids + 2.0) / (ids + 1.0)) / math.log1p(range_max)).astype(np.float32)


def uniform_draws(rng: np.random.Generator, range_max: int, count: int) -> np.ndarray:
    return rng.integers(0, range_max, size=count, dtype=np.int64)


def uniform_probability(ids: np.ndarray, range_max: int) -> np.ndarray:
    return np.full(ids.shape, 1.0 / range_max, dtype=np.float32)


def expected_count(probability: np.ndarray, num_sampled: int, num_tries: int) -> np.ndarray:
    """How often an id of ``probability`` is expected among the draws: ``p * num_sampled`` when every
    try was kept, else ``1 - (1 - p) ** num_tries`` (TF's ExpectedCountHelper, in float32)."""
    if num_tries == num_sampled:
        return (probability * np.float32(num_sampled)).astype(np.float32)
    counts: np.ndarray = (-np.expm1(np.float32(num_tries) * np.log1p(-probability))).astype(np.float32)
    return counts


def sample(rng: np.random.Generator, draw: Callable[[np.random.Generator, int, int], np.ndarray], range_max: int,
           num_sampled: int, unique: bool) -> tuple[np.ndarray, int]:
    """(the sampled ids, the number of tries): with ``unique``, draws until ``num_sampled`` distinct ids."""
    if not unique:
        return draw(rng, range_max, num_sampled), num_sampled
    picked: list[int] = []
    seen: set[int] = set()
    tries = 0
    while len(picked) < num_sampled:
        for value in draw(rng, range_max, max(2 * (num_sampled - len(picked)), 16)).tolist():
            tries += 1
            if value not in seen:
                seen.add(value)
                picked.append(value)
                if len(picked) == num_sampled:
                    break
    return np.asarray(picked, dtype=np.int64), tries


def _check_true_classes(true_classes: Any, num_true: int) -> np.ndarray:
    classes = np.asarray(true_classes)
    if classes.ndim != 2:
        raise errors.InvalidArgumentError(None, None, f"true_classes must be a matrix, got shape {classes.shape}")
    if classes.shape[1] != num_true:
        raise errors.InvalidArgumentError(None, None, "true_classes must have num_true columns, "
                                                      f"expected: {num_true} was: {classes.shape[1]}")
    return classes


def _candidate_sampler(k: context.KernelContext, true_classes: Any, draw: Any, probability: Any) -> Any:
    num_true, num_sampled = int(k.attrs["num_true"]), int(k.attrs["num_sampled"])
    range_max, unique = int(k.attrs["range_max"]), bool(k.attrs["unique"])
    classes = _check_true_classes(true_classes, num_true)
    if unique and num_sampled > range_max:
        raise errors.InvalidArgumentError(None, None, "Sampler's range is too small: "
                                                      f"num_sampled {num_sampled} unique ids from range_max {range_max}")
    sampled, tries = sample(_generator(k), draw, range_max, num_sampled, unique)
    true_expected = expected_count(probability(classes.astype(np.int64), range_max), num_sampled, tries)
    sampled_expected = expected_count(probability(sampled, range_max), num_sampled, tries)
    return sampled, true_expected, sampled_expected


@register_kernel("LogUniformCandidateSampler", host_only=True)
def _log_uniform_candidate_sampler(k: context.KernelContext, step: context.StepContext, true_classes: Any) -> Any:
    return _candidate_sampler(k, true_classes, log_uniform_draws, log_uniform_probability)


@register_kernel("UniformCandidateSampler", host_only=True)
def _uniform_candidate_sampler(k: context.KernelContext, step: context.StepContext, true_classes: Any) -> Any:
    return _candidate_sampler(k, true_classes, uniform_draws, uniform_probability)


@register_kernel("ComputeAccidentalHits", host_only=True)
def _compute_accidental_hits(k: context.KernelContext, step: context.StepContext, true_classes: Any,
                             sampled_candidates: Any) -> Any:
    """(row, position in the sample, -FLT_MAX) for every true class of a row that was also sampled;
    an id sampled twice is found at its last position, as TF's kernel finds it."""
    classes = _check_true_classes(true_classes, int(k.attrs["num_true"]))
    position_of = {int(value): j for j, value in enumerate(np.asarray(sampled_candidates).tolist())}
    rows: list[int] = []
    positions: list[int] = []
    for row, labels in enumerate(classes.tolist()):
        for label in labels:
            found = position_of.get(int(label))
            if found is not None:
                rows.append(row)
                positions.append(found)
    weights = np.full(len(rows), np.finfo(np.float32).min, dtype=np.float32)
    return np.asarray(rows, dtype=np.int32), np.asarray(positions, dtype=np.int64), weights
