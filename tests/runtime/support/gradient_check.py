"""Finite-difference check of ``tf.gradients``: the oracle for every gradient rule.

``check_gradient(build, *inputs)`` builds ``build(*placeholders)`` in a fresh graph,
projects its output(s) on fixed random directions ``r`` (``loss = sum(y * r)``, so
every output element matters with a different weight), and compares the symbolic
gradient of that loss with central differences ``(f(x + h) - f(x - h)) / 2h`` taken
element by element. Inputs should be float64: with h = 1e-6 the truncation error of
central differences is O(h^2) and the rounding error O(eps / h) ~ 1e-10, which is
what the default tolerances allow.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

import tensorgrid as tf


def check_gradient(
    build: Callable[..., Any],
    *inputs: np.ndarray,
    wrt: Optional[Sequence[int]] = None,
    delta: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    unknown_dims: bool = False,
    device: Optional[str] = None,
    seed: int = 0,
) -> list[np.ndarray]:
    """Asserts that the gradients of ``build`` at ``inputs`` match central differences.

    ``build`` takes one placeholder per input and returns a tensor or a list of
    tensors. ``wrt`` selects the inputs to differentiate (all by default).
    ``unknown_dims`` gives the placeholders unknown dimensions (rank kept), so that
    gradient rules take their dynamic-shape paths. ``device`` builds the graph under
    ``tf.device(device)``. Returns the symbolic gradients.
    """
    arrays = [np.asarray(x) for x in inputs]
    positions = list(range(len(arrays))) if wrt is None else list(wrt)
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        placeholders = [
            tf.placeholder(tf.as_dtype(a.dtype), [None] * a.ndim if unknown_dims else a.shape, name=f"x{i}")
            for i, a in enumerate(arrays)
        ]
        built = build(*placeholders)
        outputs = list(built) if isinstance(built, (list, tuple)) else [built]
        directions = [tf.placeholder(y.dtype.base_dtype, y.shape, name=f"r{i}") for i, y in enumerate(outputs)]
        loss = tf.add_n([tf.reduce_sum(y * r) for y, r in zip(outputs, directions)])
        grads = tf.gradients(loss, [placeholders[i] for i in positions])

    feed: dict[Any, Any] = dict(zip(placeholders, arrays))
    rng = np.random.default_rng(seed)
    with tf.Session(graph=graph) as sess:
        values = sess.run(outputs, feed)
        feed.update({r: rng.standard_normal(np.shape(v)).astype(np.asarray(v).dtype)
                     for r, v in zip(directions, values)})
        symbolic = sess.run([g for g in grads if g is not None], feed)
        by_position = iter(symbolic)
        results = []
        for position, grad in zip(positions, grads):
            numeric = _central_differences(sess, loss, feed, placeholders[position], delta)
            if grad is None:
                np.testing.assert_allclose(
                    numeric, 0, atol=atol,
                    err_msg=f"tf.gradients returned None for input {position}, but the numeric gradient is not zero",
                )
                results.append(np.zeros_like(numeric))
                continue
            analytic = densify(next(by_position))
            assert np.shape(analytic) == numeric.shape, (
                f"gradient for input {position} has shape {np.shape(analytic)}, expected {numeric.shape}"
            )
            np.testing.assert_allclose(
                analytic, numeric, rtol=rtol, atol=atol,
                err_msg=f"symbolic vs numeric gradient for input {position} (shape {numeric.shape})",
            )
            results.append(np.asarray(analytic))
    return results


def densify(value: Any) -> Any:
    """A fetched gradient as a dense array: an ``IndexedSlicesValue`` scatter-added into zeros."""
    if not isinstance(value, tf.IndexedSlicesValue):
        return value
    dense = np.zeros(value.dense_shape, dtype=value.values.dtype)
    np.add.at(dense, value.indices, value.values)
    return dense


def _central_differences(sess: Any, loss: Any, feed: dict[Any, Any], x: Any, delta: float) -> np.ndarray:
    base = feed[x]
    numeric = np.zeros(base.shape, dtype=np.float64)
    probe = base.copy()
    for index in np.ndindex(base.shape):
        original = probe[index]
        probe[index] = original + delta
        plus = sess.run(loss, {**feed, x: probe})
        probe[index] = original - delta
        minus = sess.run(loss, {**feed, x: probe})
        probe[index] = original
        numeric[index] = (plus - minus) / (2 * delta)
    return numeric
