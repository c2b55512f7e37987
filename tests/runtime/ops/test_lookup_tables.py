"""``tf.lookup`` tables against TensorFlow 2.21's ``tf.compat.v1``: the values and ids of
lookups (string and integer keys, dense and sparse), out-of-vocabulary buckets, sizes,
vocabulary files, and the errors of a table used before ``tf.tables_initializer()`` or
filled twice with different entries.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def lookup_module(tf: Any) -> Any:
    """Where ``index_table_from_tensor`` / ``_from_file`` live: TensorFlow keeps them in
    ``lookup_ops`` (TF1's ``tf.contrib.lookup``), tensorgrid exports them in ``tf.lookup``."""
    if tf is tensorgrid:
        return tf.lookup
    from tensorflow.python.ops import lookup_ops

    return lookup_ops


def initialized_run(tf: Any, fetches: Any) -> Any:
    with tf.Session() as session:
        session.run(tf.tables_initializer())
        return session.run(fetches)


WORDS = ["emerson", "lake", "palmer", "", "日本"]
QUERIES = [["emerson", "king"], ["palmer", "crimson"], ["", "日本"], ["lake", "LAKE"]]
INT_VOCABULARY = [42, -1, 7, 2 ** 40]
INT_QUERIES = [42, 5, 7, 2 ** 40, -1, 0, 123456789]


def _file(tmp_path: Any) -> str:
    path = tmp_path / "vocabulary.txt"
    path.write_bytes("emerson\t10\nlake\t20\npalmer\t30\n日本\t40\n".encode())
    return str(path)


BUILDS: dict[str, Callable[[Any, str], Any]] = {
    "static hash table, string to int64": lambda tf, _: tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(WORDS, np.arange(5, dtype=np.int64) * 3), -7).lookup(
        tf.constant(QUERIES)),
    "static hash table, int64 to string": lambda tf, _: tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(INT_VOCABULARY, tf.int64), ["a", "b", "c", "d"]),
        "none").lookup(tf.constant(INT_QUERIES, tf.int64)),
    "static hash table, int32 to float": lambda tf, _: tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer([3, 1, 2], [0.5, 1.5, 2.5]), -1.0).lookup(tf.constant([1, 4, 3, 3])),
    "sizes": lambda tf, _: [tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(WORDS, [0, 1, 2, 3, 4]),
                                                      -1).size(),
                            lookup_module(tf).index_table_from_tensor(WORDS, num_oov_buckets=3).size()],
    "index table without OOV buckets": lambda tf, _: lookup_module(tf).index_table_from_tensor(
        WORDS, default_value=-5).lookup(tf.constant(QUERIES)),
    "index table with OOV buckets": lambda tf, _: lookup_module(tf).index_table_from_tensor(
        WORDS, num_oov_buckets=7).lookup(tf.constant(["king", "crimson", "lake", "queen", "x" * 70, "\xff"])),
    "integer index table with OOV buckets": lambda tf, _: lookup_module(tf).index_table_from_tensor(
        tf.constant(INT_VOCABULARY, tf.int64), num_oov_buckets=5, dtype=tf.int64).lookup(
        tf.constant(INT_QUERIES, tf.int64)),
    "int32 keys of an integer index table": lambda tf, _: lookup_module(tf).index_table_from_tensor(
        [4, 5, 6], num_oov_buckets=3, dtype=tf.int32).lookup(tf.constant([6, 9, 4, -3])),
    "strong hash OOV buckets": lambda tf, _: lookup_module(tf).index_table_from_tensor(
        WORDS, num_oov_buckets=11, hasher_spec=lookup_module(tf).StrongHashSpec([3, 4])).lookup(
        tf.constant(["king", "lake", "queen"])),
    "legacy hash OOV buckets": lambda tf, _: lookup_module(tf).index_table_from_tensor(
        WORDS, num_oov_buckets=11, hasher_spec=lookup_module(tf).HasherSpec("legacy", None)).lookup(
        tf.constant(["king", "lake", "queen"])),
    "static vocabulary table": lambda tf, _: tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(WORDS, tf.constant([0, 1, 2, 3, 4], tf.int64)), 4).lookup(
        tf.constant(QUERIES)),
    "sparse keys": lambda tf, _: lookup_module(tf).index_table_from_tensor(WORDS, num_oov_buckets=2).lookup(
        tf.SparseTensor([[0, 0], [0, 3], [2, 1]], ["lake", "zz", "emerson"], [3, 4])),
    "index table from a file": lambda tf, path: lookup_module(tf).index_table_from_file(
        path, num_oov_buckets=2, delimiter="\t", key_column_index=0).lookup(
        tf.constant(["lake", "日本", "queen", "emerson"])),
    "text file initializer, column to column": lambda tf, path: tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(path, tf.string, 0, tf.int64, 1, delimiter="\t"), -1).lookup(
        tf.constant(["palmer", "lake", "tarkus"])),
    "text file initializer, whole line to line number, vocab_size": lambda tf, path: tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                      tf.lookup.TextFileIndex.LINE_NUMBER, vocab_size=2), -1).lookup(
        tf.constant(["lake\t20", "palmer\t30", "emerson\t10"])),
    "text file initializer, value offset": lambda tf, path: tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(path, tf.string, 0, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                                      value_index_offset=100), -1).lookup(tf.constant(["palmer", "x"])),
}


def _as_plain(value: Any) -> Any:
    if hasattr(value, "indices") and hasattr(value, "dense_shape"):
        return ("sparse", value.indices.tolist(), value.values.tolist(), list(value.dense_shape))
    if isinstance(value, list):
        return [_as_plain(v) for v in value]
    array = np.asarray(value)
    return (str(array.dtype), array.tolist())


@pytest.mark.oracle
@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
def test_lookups_give_tensorflows_values(build: Callable[[Any, str], Any], tf1: Any, tmp_path: Any) -> None:
    path = _file(tmp_path)
    results = []
    for library in (tensorgrid, tf1):
        with library.Graph().as_default():
            results.append(_as_plain(initialized_run(library, build(library, path))))
    assert results[0] == results[1]


def test_a_table_used_before_its_initializer_fails(lib: Any) -> None:
    table = lib.lookup.StaticHashTable(lib.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2]), -1)
    found = table.lookup(lib.constant(["a"]))
    with lib.Session() as session:
        assert session.run(table.size()) == 0
        with pytest.raises(lib.errors.FailedPreconditionError, match="Table not initialized"):
            session.run(found)
        session.run(table.initializer)
        session.run(lib.tables_initializer())  # the same entries again: nothing changes
        assert session.run(found).tolist() == [1]


def test_tables_initializer_groups_the_collection(lib: Any) -> None:
    assert lib.tables_initializer().type == "NoOp"
    table = lib.lookup.StaticHashTable(lib.lookup.KeyValueTensorInitializer(["a"], [1]), -1)
    assert lib.get_collection(lib.GraphKeys.TABLE_INITIALIZERS) == [table.initializer]
    assert lib.tables_initializer(name="init_tables").name == "init_tables"


def test_conflicting_entries_fail(lib: Any) -> None:
    table = lib.lookup.StaticHashTable(lib.lookup.KeyValueTensorInitializer(["a", "a"], [1, 2]), -1)
    with lib.Session() as session:
        with pytest.raises(lib.errors.FailedPreconditionError, match="different value for same key"):
            session.run(table.initializer)


def test_keys_of_another_dtype_are_refused(lib: Any) -> None:
    table = lib.lookup.StaticHashTable(lib.lookup.KeyValueTensorInitializer(["a"], [1]), -1)
    with pytest.raises(TypeError, match="must be"):
        table.lookup(lib.constant([1, 2]))
    with pytest.raises(TypeError, match="Invalid key dtype"):
        lib.lookup.KeyValueTensorInitializer(["a"], [1]).initialize(
            lib.lookup.StaticHashTable(lib.lookup.KeyValueTensorInitializer([1], [1]), -1))


def test_a_missing_vocabulary_file_is_not_found(lib: Any, tmp_path: Any) -> None:
    lookup_module(lib).index_table_from_file(str(tmp_path / "missing.txt"))
    with lib.Session() as session:
        with pytest.raises(lib.errors.NotFoundError):
            session.run(lib.tables_initializer())


@pytest.mark.parametrize("content, key_index, vocab_size, message", [
    (b"a\n\nb\n", -2, None, "empty line found at position 3"),
    (b"a\nb\n", -2, 3, "vocab_size"),
    (b"a\tb\nc\n", 1, None, "Invalid number of columns"),
], ids=["an empty line", "fewer lines than vocab_size", "a line without the column"])
def test_a_bad_vocabulary_file_is_refused(lib: Any, tmp_path: Any, content: bytes, key_index: int, vocab_size: Any,
                                          message: str) -> None:
    path = tmp_path / "vocabulary.txt"
    path.write_bytes(content)
    lib.lookup.StaticHashTable(lib.lookup.TextFileInitializer(str(path), lib.string, key_index, lib.int64,
                                                              lib.lookup.TextFileIndex.LINE_NUMBER,
                                                              vocab_size=vocab_size), -1)
    with lib.Session() as session:
        with pytest.raises(lib.errors.InvalidArgumentError, match=message):
            session.run(lib.tables_initializer())
