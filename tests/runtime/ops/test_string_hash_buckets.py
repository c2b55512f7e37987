"""String bucket ops against TensorFlow 2.21's ``tf.compat.v1``: the same bucket for every
string, so feature columns hash examples as TensorFlow does.

The strings cross every branch of FarmHash's Fingerprint64 (0, 1-3, 4-7, 8-16, 17-32, 33-64
and over 64 bytes, one and several 64-byte blocks), every tail length of SipHash and
MurmurHash's 8-byte words, UTF-8 text and bytes with the high bit set; the bucket counts
include 1, small primes, a power of two and the int64 maximum (the hash itself, all but the
top bit). ``fingerprint_cat64``, the combiner of ``crossed_column``, is checked against
``tf.sparse.cross_hashed``.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid
from tensorgrid.kernels import hash_functions

_RANDOM = random.Random(25)
STRINGS = ([b""] + [bytes(_RANDOM.randrange(256) for _ in range(n)) for n in range(1, 200)]
           + [bytes(_RANDOM.randrange(256) for _ in range(n)) for n in (255, 256, 257, 1000, 4099)]
           + [b"a" * n for n in (16, 17, 32, 33, 64, 65, 128, 129)]
           + ["héllo wörld ✓ 日本語".encode(), b"\xff" * 9, b"\x80\x00\x7f", b"user_123", b"click"])
BUCKET_COUNTS = [1, 2, 7, 1000, 2 ** 20, 2 ** 63 - 1]


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def run(tf: Any, fetch: Any) -> Any:
    with tf.Session() as session:
        return session.run(fetch)


def buckets_by_op(tf: Any) -> dict[str, list[Any]]:
    strings = tf.constant(STRINGS)
    return {
        "fast": [tf.strings.to_hash_bucket_fast(strings, n) for n in BUCKET_COUNTS],
        "fast (TF1 name)": [tf.string_to_hash_bucket_fast(strings, n) for n in BUCKET_COUNTS],
        "strong": [tf.strings.to_hash_bucket_strong(strings, n, key) for n in BUCKET_COUNTS
                   for key in ([1, 2], [0, 0], [-5, 2 ** 63 - 1])],
        "legacy": [tf.string_to_hash_bucket(strings, n) for n in BUCKET_COUNTS],
        "legacy (tf.strings)": [tf.strings.to_hash_bucket(strings, n) for n in BUCKET_COUNTS],
    }


@pytest.mark.oracle
def test_every_string_lands_in_tensorflows_bucket(tf1: Any) -> None:
    results = {}
    for library in (tensorgrid, tf1):
        with library.Graph().as_default():
            results[library is tf1] = run(library, buckets_by_op(library))
    for op, want in results[True].items():
        got = results[False][op]
        for index, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == np.int64 and g.shape == w.shape, op
            wrong = np.nonzero(g != w)[0]
            assert not len(wrong), f"{op} #{index}: strings {[STRINGS[i] for i in wrong[:5]]} in other buckets"


def test_bucket_ops_keep_the_shape_and_names(lib: Any) -> None:
    strings = lib.placeholder(lib.string, [None, 3])
    fast = lib.strings.to_hash_bucket_fast(strings, 10, name="buckets")
    assert (fast.op.type, fast.op.name, fast.dtype, fast.shape.as_list()) == (
        "StringToHashBucketFast", "buckets", lib.int64, [None, 3])
    assert lib.string_to_hash_bucket_strong(strings, 3, [1, 2]).op.type == "StringToHashBucketStrong"
    assert lib.string_to_hash_bucket(strings, 3).op.type == "StringToHashBucket"
    with lib.Session() as session:
        got = session.run(fast, {strings: [["a", "b", "c"], ["", "a", "zz"]]})
    assert got.shape == (2, 3) and got[0, 0] == got[1, 1] and ((0 <= got) & (got < 10)).all()


def test_bad_arguments_fail_as_in_tensorflow(lib: Any) -> None:
    with pytest.raises(ValueError, match="num_buckets"):
        lib.strings.to_hash_bucket_fast(["a"], 0)
    with pytest.raises(TypeError):
        lib.strings.to_hash_bucket_fast(lib.constant([1, 2]), 3)
    with pytest.raises(ValueError, match="out of range"):
        lib.strings.to_hash_bucket_strong(["a"], 3, [1, 2 ** 64])
    wrong_key = lib.strings.to_hash_bucket_strong(["a"], 3, [1, 2, 3])
    with pytest.raises(lib.errors.InvalidArgumentError, match="Key must have 2 elements"):
        run(lib, wrong_key)


def test_as_string_of_integers(lib: Any) -> None:
    values = lib.constant([[0, -7], [123456789012, 2 ** 62]], dtype=lib.int64)
    assert run(lib, lib.as_string(values)).tolist() == [[b"0", b"-7"], [b"123456789012", str(2 ** 62).encode()]]
    assert run(lib, lib.strings.as_string(lib.constant([True, False]))).tolist() == [b"true", b"false"]


@pytest.mark.oracle
def test_fingerprint_cat64_crosses_features_as_sparse_cross_hashed(tf1: Any) -> None:
    """TensorFlow crosses sparse inputs first, then dense ones; a string feature enters by its
    Fingerprint64, an int64 feature as it is; the cross starts from ``hash_key``."""
    words = [[b"x", b"y"], [b"z", b"w"]]
    ids = [[3, 4], [-7, 2 ** 40]]
    sparse_words = [[b"p"], [b"q"]]
    with tf1.Graph().as_default():
        crosses = [tf1.sparse.cross_hashed(
            [tf1.SparseTensor([[0, 0], [1, 0]], [b"p", b"q"], [2, 1]), tf1.constant(words),
             tf1.constant(ids, dtype=tf1.int64)], num_buckets=buckets, hash_key=key)
            for buckets, key in ((1000, 12345), (0, 0xDECAFCAFFE))]
        want = [cross.values.tolist() for cross in run(tf1, crosses)]

    def feature_hash(value: Any) -> np.ndarray:
        if isinstance(value, bytes):
            return hash_functions.fingerprint64([value])
        return np.asarray([value], dtype=np.int64).astype(np.uint64)

    def cross(key: int, buckets: int) -> list[int]:
        out = []
        for row in range(2):
            for combination in itertools.product(sparse_words[row], words[row], ids[row]):
                hashed = np.asarray([key], dtype=np.uint64)
                for value in combination:
                    hashed = hash_functions.fingerprint_cat64(hashed, feature_hash(value))
                out.append(int(hashed[0] % np.uint64(buckets or 2 ** 63 - 1)))
        return out

    assert [cross(12345, 1000), cross(0xDECAFCAFFE, 0)] == want


def test_hash_functions_take_str_and_refuse_other_values() -> None:
    assert hash_functions.fingerprint64(["héllo"])[0] == hash_functions.fingerprint64(["héllo".encode()])[0]
    assert hash_functions.fingerprint64([]).shape == (0,)
    with pytest.raises(TypeError, match="bytes or str"):
        hash_functions.fingerprint64([3])
    with pytest.raises(ValueError, match="key of 2"):
        hash_functions.siphash24([b"a"], [1])
