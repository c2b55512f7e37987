"""``tf.summary.histogram``'s ``HistogramProto``, field by field, against TensorFlow 2.21.

tensorgrid computes the histogram in numpy (each value's bucket from its bits, not a binary
search per value); every field must still be TensorFlow's: min and max (the first of equal
extremes, so the sign of a zero), num, the sum and sum of squares added in order (their
last bits), the bucket limits and counts with runs of empty buckets collapsed, denormals
flushed as TensorFlow's CPU threads flush them. Inputs: empty, one value, all equal, negatives,
signed zeros, denormals, integers, float16/float64, every bucket limit and its neighbours, a
million values; NaN and infinities fail as TensorFlow's do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid
from tensorgrid.kernels import summary_kernels

RNG = np.random.default_rng(7)
LIMITS = summary_kernels._BUCKET_LIMITS[1:-1]  # without +-DBL_MAX, where TensorFlow's count overflows

VALUES: dict[str, np.ndarray] = {
    "empty": np.zeros([0], np.float32),
    "one value": np.array([2.5], np.float32),
    "all equal": np.full([4, 3], -1.75, np.float32),
    "negatives": -np.abs(RNG.standard_normal(300)).astype(np.float32),
    "zeros": np.zeros(5, np.float32),
    "minus zero first": np.array([-0.0, 0.0, 1.0, -0.0], np.float64),
    "plus zero first": np.array([0.0, -0.0, -1.0, 0.0], np.float64),
    "float64 over 60 decades": RNG.standard_normal(5000) * np.exp(RNG.uniform(-70, 70, 5000)),
    "below 1e-12 and huge": np.array([1e-13, -1e-13, 5e-324, -5e-324, 1e300, -1e300, 1e20, -1e20]),
    "every limit": np.concatenate([LIMITS, np.nextafter(LIMITS, np.inf), np.nextafter(LIMITS, -np.inf)]),
    "float32 denormals": np.array([1e-40, -1e-40, 1e-20, -3e-39], np.float32),
    "float64 denormals": np.array([5e-324, 0.0, -5e-324, 1e-308, -1e-308, 3e-308, -2.5e-308]),
    "squares and sums below the normal range": np.array([1e-160, 1e-155, -1e-300, 3e-300, 2e-292]),
    "int32": RNG.integers(-1000, 1000, 500).astype(np.int32),
    "int64": RNG.integers(-(2**40), 2**40, 500),
    "uint8": RNG.integers(0, 256, 500).astype(np.uint8),
    "float16": RNG.standard_normal(500).astype(np.float16),
    "a million values": RNG.standard_normal(1_000_000).astype(np.float32) * 3,
}


def histogram(tf: Any, values: np.ndarray) -> Any:
    """The HistogramProto of ``tf.summary.histogram`` of ``values``, parsed by TensorFlow's protos."""
    with tf.Graph().as_default():
        weights = tf.placeholder(tf.as_dtype(values.dtype), values.shape)
        summary = tf.summary.histogram("weights", weights)
        with tf.Session() as sess:
            serialized = sess.run(summary, {weights: values})
    return serialized


@pytest.mark.oracle
@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_histogram_proto_is_tensorflows(values: np.ndarray, tf1: Any) -> None:
    ours, theirs = (tf1.Summary.FromString(histogram(lib, values)).value[0].histo for lib in (tensorgrid, tf1))
    for field in ("min", "max", "num", "sum", "sum_squares"):
        # compared as bytes: the same last bits, and the same sign of a zero
        assert np.float64(getattr(ours, field)).tobytes() == np.float64(getattr(theirs, field)).tobytes(), field
    assert list(ours.bucket_limit) == list(theirs.bucket_limit)
    assert list(ours.bucket) == list(theirs.bucket)
    assert ours.SerializeToString() == theirs.SerializeToString()


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TF1 (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.mark.parametrize(("bad", "message"), [(np.nan, "Nan in summary histogram for: "),
                                              (np.inf, "Infinity in Histogram for: "),
                                              (-np.inf, "Infinity in Histogram for: ")])
def test_nan_and_infinities_fail_as_in_tensorflow(lib: Any, bad: float, message: str) -> None:
    with lib.Graph().as_default():
        x = lib.placeholder(lib.float32, [None])
        summary = lib.summary.histogram("h", x)
        with lib.Session() as sess, pytest.raises(lib.errors.InvalidArgumentError, match=message + "h"):
            sess.run(summary, {x: [1.0, bad, 2.0]})
