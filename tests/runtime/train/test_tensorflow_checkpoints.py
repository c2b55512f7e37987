"""TensorFlow's own checkpoints (V2 bundles: ``P.index`` and ``P.data-00000-of-00001``), with TensorFlow
2.21's ``tf.compat.v1`` as the oracle: what TensorFlow saves, tensorgrid reads with no conversion
(``Saver.restore``, ``latest_checkpoint``, ``list_variables``/``load_variable``/``NewCheckpointReader``,
``warm_start`` with a vocabulary remapping, ``Estimator(warm_start_from=...)``), partitioned variables saved as slices included, into any
number of parts; and a model trained with tensorgrid, converted (``tf.train.convert_checkpoint``,
``tensorgrid checkpoint convert``), is what TensorFlow's ``Saver.restore`` restores. A corrupted file
is a DataLossError naming it, on both libraries."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid
from tensorgrid import cli
from tensorgrid.train import tensorflow_bundle

VALUES = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
    "f64": np.array([1e-300, -2.5, np.pi]),
    "i32": np.array([[-(2 ** 31), 0], [7, 2 ** 31 - 1]], np.int32),
    "i64": np.array([-(2 ** 63), 2 ** 40, 3], np.int64),
    "flags": np.array([True, False, True]),
    "scalar": np.float32(4.5),
    "scalar_int": np.int64(-12),
    "empty": np.zeros([0, 4], np.float32),
    "words": np.array([b"", b"apple", "caf\u00e9".encode(), bytes(range(256))], dtype=object),
    "scope/nested": np.array([[1, 2]], np.int32),
}
TABLE = np.arange(30, dtype=np.float32).reshape(10, 3) / 10


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on: tensorgrid, or TF1 (the oracle)."""
    yield tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def tensorflow_saves_values(tf1: Any, directory: Path) -> str:
    """A TensorFlow checkpoint of VALUES (one variable each) and ``table``, in 3 parts (slices)."""
    with tf1.Graph().as_default(), tf1.Session() as session:
        for name, value in VALUES.items():
            tf1.Variable(value, name=name)
        tf1.get_variable("table", [10, 3], initializer=table_rows(tf1), partitioner=tf1.fixed_size_partitioner(3))
        session.run(tf1.global_variables_initializer())
        return str(tf1.train.Saver().save(session, str(directory / "model.ckpt"), global_step=7))


@pytest.fixture(scope="module")
def saved_by_tensorflow(tf1: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of one TensorFlow checkpoint of VALUES and ``table`` (tensorflow_saves_values),
    shared by the tests that only read it."""
    directory = tmp_path_factory.mktemp("saved_by_tensorflow")
    tensorflow_saves_values(tf1, directory)
    return directory


def table_rows(tf: Any) -> Any:
    """An initializer giving each part of ``table`` its rows of TABLE."""
    def initialize(shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        start = partition_info.var_offset[0] if partition_info is not None else 0
        return tf.constant(TABLE[start:start + shape[0]])
    return initialize


def sparse_model(tf: Any, parts: int) -> tuple[Any, Any]:
    """A table in ``parts`` parts and a dense kernel, trained by Adagrad (slots on every part)."""
    partitioner = tf.fixed_size_partitioner(parts) if parts > 1 else None
    table = tf.get_variable("table", [10, 3], initializer=tf.constant_initializer(0.5), partitioner=partitioner)
    kernel = tf.get_variable("kernel", [3, 1], initializer=tf.constant_initializer(0.25))
    rows = tf.nn.embedding_lookup(table, [1, 8, 8, 4], partition_strategy="div")
    loss = tf.reduce_sum(tf.square(tf.matmul(rows, kernel) - 1.0))
    train = tf.train.AdagradOptimizer(0.3).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return train, table


def model_values(tf: Any, session: Any) -> dict[str, np.ndarray]:
    """Every global variable by checkpoint key, a partitioned variable (and its slots) whole."""
    parts: dict[str, list[tuple[int, np.ndarray]]] = {}
    for variable in tf.global_variables():
        info = variable._get_save_slice_info()
        name = info.full_name if info is not None else variable.op.name
        parts.setdefault(name, []).append((info.var_offset[0] if info is not None else 0, session.run(variable)))
    return {name: np.concatenate([value for _, value in sorted(found, key=lambda p: p[0])]) if found[0][1].ndim
            else found[0][1] for name, found in parts.items()}


def train_and_save(tf: Any, directory: Path, parts: int) -> tuple[str, dict[str, np.ndarray]]:
    with tf.Graph().as_default(), tf.Session() as session:
        train, _ = sparse_model(tf, parts)
        session.run(tf.global_variables_initializer())
        for _ in range(3):
            session.run(train)
        prefix = tf.train.Saver().save(session, str(directory / "model.ckpt"), global_step=3)
        return str(prefix), model_values(tf, session)


def restore(tf: Any, checkpoint: str, parts: int) -> dict[str, np.ndarray]:
    with tf.Graph().as_default(), tf.Session() as session:
        sparse_model(tf, parts)
        tf.train.Saver().restore(session, checkpoint)
        return model_values(tf, session)


def assert_same(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(value), err_msg=name)
        assert np.asarray(got[name]).dtype == np.asarray(value).dtype, name


# ---------------------------------------------------------------------- reading TensorFlow's checkpoints

def test_every_dtype_of_a_tensorflow_checkpoint_reads_as_tensorflow_reads_it(tf1: Any, saved_by_tensorflow: Path) -> None:
    tmp_path = saved_by_tensorflow
    prefix = str(tmp_path / "model.ckpt-7")
    assert tensorgrid.train.latest_checkpoint(str(tmp_path)) == prefix == tf1.train.latest_checkpoint(str(tmp_path))
    listed = tensorgrid.train.list_variables(str(tmp_path))
    assert listed == [(name, list(shape)) for name, shape in tf1.train.list_variables(prefix)]
    assert dict(listed)["table"] == [10, 3]
    ours = {name: tensorgrid.train.load_variable(prefix, name) for name, _ in listed}
    assert_same(ours, {name: tf1.train.load_variable(prefix, name) for name, _ in listed})
    assert_same({name: ours[name] for name in VALUES}, {name: np.asarray(v) for name, v in VALUES.items()})
    reader = tensorgrid.train.NewCheckpointReader(prefix)
    theirs = tf1.train.NewCheckpointReader(prefix)
    assert {n: d.name for n, d in reader.get_variable_to_dtype_map().items()} == \
        {n: d.name for n, d in theirs.get_variable_to_dtype_map().items()}
    assert reader.has_tensor("table") and not reader.has_tensor("table/part_0")


def test_saver_restores_a_tensorflow_model_into_any_number_of_parts(tf1: Any, tmp_path: Path) -> None:
    prefix, trained = train_and_save(tf1, tmp_path, parts=3)
    assert tensorgrid.train.latest_checkpoint(str(tmp_path)) == prefix
    assert trained["global_step"] == 3 and "table/Adagrad" in trained
    for parts in (1, 2, 4):
        assert_same(restore(tensorgrid, tensorgrid.train.latest_checkpoint(str(tmp_path)), parts), trained)


def test_a_sharded_tensorflow_checkpoint_reads_from_each_data_file(tf1: Any, tmp_path: Path) -> None:
    with tf1.Graph().as_default(), tf1.Session(config=tf1.ConfigProto(device_count={"CPU": 2})) as session:
        for device, name in (("/cpu:0", "f32"), ("/cpu:1", "i64")):
            with tf1.device(device):
                tf1.Variable(VALUES[name], name=name)
        session.run(tf1.global_variables_initializer())
        prefix = tf1.train.Saver(sharded=True).save(session, str(tmp_path / "model.ckpt"))
    assert sorted(p.name for p in tmp_path.glob("model.ckpt.data-*")) == [
        "model.ckpt.data-00000-of-00002", "model.ckpt.data-00001-of-00002"]
    assert_same({name: tensorgrid.train.load_variable(prefix, name) for name in ("f32", "i64")},
                {name: VALUES[name] for name in ("f32", "i64")})


def test_training_goes_on_in_a_tensorflow_model_directory(tf1: Any, tmp_path: Path) -> None:
    """Restored from TensorFlow's checkpoint, saved in tensorgrid's: max_to_keep deletes all of TensorFlow's files."""
    tf = tensorgrid
    prefix, trained = train_and_save(tf1, tmp_path, parts=3)
    with tf.Graph().as_default(), tf.Session() as session:
        train, _ = sparse_model(tf, 2)
        saver = tf.train.Saver(max_to_keep=1)
        saver.recover_last_checkpoints([prefix])
        saver.restore(session, tf.train.latest_checkpoint(str(tmp_path)))
        session.run(train)
        saver.save(session, str(tmp_path / "model.ckpt"), global_step=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "model.ckpt-4.data", "model.ckpt-4.index", "model.ckpt-4.meta"]
    assert tensorgrid.train.load_variable(str(tmp_path), "global_step") == trained["global_step"] + 1


def test_warm_start_with_a_vocabulary_reads_a_tensorflow_checkpoint(lib: Any, saved_by_tensorflow: Path,
                                                                    tmp_path: Path) -> None:
    tf = lib
    (tmp_path / "old.txt").write_text("".join(f"w{i}\n" for i in range(10)))
    (tmp_path / "new.txt").write_text("w7\nnew\nw0\nw3\n")
    vocab = tf.train.VocabInfo(new_vocab=str(tmp_path / "new.txt"), new_vocab_size=4, num_oov_buckets=0,
                               old_vocab=str(tmp_path / "old.txt"))
    with tf.Graph().as_default(), tf.Session() as session:
        remapped = tf.get_variable("table", [4, 3], initializer=tf.constant_initializer(-1.0),
                                   partitioner=tf.fixed_size_partitioner(2))
        kernel = tf.get_variable("f32", [2, 3], initializer=tf.zeros_initializer())
        tf.train.warm_start(str(saved_by_tensorflow), vars_to_warm_start="f32|table",
                            var_name_to_vocab_info={"table": vocab})
        session.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(session.run(remapped.as_tensor()), [TABLE[7], [0, 0, 0], TABLE[0], TABLE[3]])
        np.testing.assert_array_equal(session.run(kernel), VALUES["f32"])


def test_an_estimator_warm_starts_from_a_tensorflow_model_directory(saved_by_tensorflow: Path, tmp_path: Path) -> None:
    tf = tensorgrid

    def model_fn(features: Any, labels: Any, mode: Any) -> Any:
        weights = tf.get_variable("f32", [2, 3], initializer=tf.zeros_initializer())
        loss = tf.reduce_sum(tf.matmul(features["x"], weights))
        return tf.estimator.EstimatorSpec(mode, loss=loss,
                                          train_op=tf.assign_add(tf.train.get_or_create_global_step(), 1))

    estimator = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "estimator"),
                                       warm_start_from=str(saved_by_tensorflow))
    estimator.train(lambda: ({"x": tf.ones([1, 2])}, tf.zeros([1])), steps=1)
    np.testing.assert_array_equal(estimator.get_variable_value("f32"), VALUES["f32"])


def restore_f32(tf: Any, prefix: str) -> None:
    with tf.Graph().as_default(), tf.Session() as session:
        saver = tf.train.Saver([tf.get_variable("f32", [2, 3])])
        saver.restore(session, prefix)


def test_a_corrupted_tensorflow_checkpoint_is_a_data_loss_error_naming_the_file(lib: Any, tf1: Any,
                                                                                tmp_path: Path) -> None:
    prefix = tensorflow_saves_values(tf1, tmp_path)
    data = Path(prefix + ".data-00000-of-00001")
    assert tensorflow_bundle.BundleReader(prefix).entries["f32"].offset == 0  # keys in order: "empty" holds no byte
    content = bytearray(data.read_bytes())
    content[4] ^= 0xFF
    data.write_bytes(bytes(content))
    with pytest.raises(lib.errors.DataLossError, match=r"model\.ckpt-7") as raised:
        restore_f32(lib, prefix)
    if lib is tensorgrid:
        assert "data-00000-of-00001" in str(raised.value) and "f32" in str(raised.value)
    index = Path(prefix + ".index")
    content = bytearray(index.read_bytes())
    content[20] ^= 0xFF  # inside the first data block
    index.write_bytes(bytes(content))
    with pytest.raises(lib.errors.DataLossError, match=r"model\.ckpt-7\.index"):
        restore_f32(lib, prefix)


# ---------------------------------------------------------------------- writing TensorFlow's format

def test_a_tensorgrid_model_converted_restores_in_tensorflow(tf1: Any, tmp_path: Path) -> None:
    prefix, trained = train_and_save(tensorgrid, tmp_path / "tg", parts=2)
    converted = tensorgrid.train.convert_checkpoint(str(tmp_path / "tg"), str(tmp_path / "tf" / "model.ckpt-3"))
    assert tf1.train.latest_checkpoint(str(tmp_path / "tf")) == converted
    assert_same(restore(tf1, converted, parts=3), trained)
    assert_same(restore(tf1, converted, parts=1), trained)
    assert prefix.endswith("model.ckpt-3")


def test_the_command_converts_both_ways(tf1: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    written = str(tmp_path / "tf" / "values")
    tensorflow_bundle.write_bundle(written, VALUES)
    assert_same({name: tf1.train.load_variable(written, name) for name in VALUES},
                {name: np.asarray(v) for name, v in VALUES.items()})
    numbers = {name: value for name, value in VALUES.items() if name != "words"}
    tensorgrid_copy = str(tmp_path / "tg" / "values")
    tensorflow_bundle.write_bundle(str(tmp_path / "numbers"), numbers)
    assert cli.main(["checkpoint", "convert", str(tmp_path / "numbers"), tensorgrid_copy, "--to", "tensorgrid"]) == 0
    assert Path(tensorgrid_copy + ".index").read_bytes().startswith(b"{")
    back = str(tmp_path / "back" / "values")
    assert cli.main(["checkpoint", "convert", str(tmp_path / "tg"), back, "--to", "tensorflow"]) == 0
    assert_same({name: tf1.train.load_variable(back, name) for name in numbers},
                {name: np.asarray(v) for name, v in numbers.items()})
    assert cli.main(["checkpoint", "convert", written, str(tmp_path / "x"), "--to", "tensorgrid"]) == 1
    assert "string tensors words" in capsys.readouterr().err
    assert cli.main(["checkpoint", "convert", written, back, "--to", "tensorflow"]) == 1
    assert "holds a checkpoint already" in capsys.readouterr().err


def test_slice_keys_are_tensorflows() -> None:
    """The keys of slices' entries (OrderedCode), for numbers of each encoded length."""
    assert tensorflow_bundle.slice_key("emb", ((0, 4), (0, -1))) == b"\x00emb\x00\x01\x01\x02\x80\x84\x80\x7f"
    encoded = [tensorflow_bundle._ordered_signed(v) for v in (-(2 ** 63), -65, -64, -1, 0, 63, 64, 2 ** 40, 2 ** 63 - 1)]
    assert encoded == sorted(encoded) and encoded[4] == b"\x80" and encoded[6] == b"\xc0\x40"


# ---------------------------------------------------------------------- init_from_checkpoint

def test_init_from_checkpoint_by_name_variable_scope_and_partitioned(lib: Any, saved_by_tensorflow: Path) -> None:
    tf = lib
    with tf.Graph().as_default(), tf.Session() as session:
        by_name = tf.get_variable("new/f32", [2, 3], initializer=tf.zeros_initializer())
        as_variable = tf.get_variable("plain", [3], tf.float64, initializer=tf.zeros_initializer())
        in_scope = tf.get_variable("other/nested", [1, 2], tf.int32, initializer=tf.zeros_initializer())
        table = tf.get_variable("new_table", [10, 3], initializer=tf.zeros_initializer(),
                                partitioner=tf.fixed_size_partitioner(2))
        untouched = tf.get_variable("other_scope/kept", [2], initializer=tf.ones_initializer())
        assignment_map = {"f32": "new/f32", "f64": as_variable, "scope/": "other/", "table": "new_table"}
        tf.train.init_from_checkpoint(str(saved_by_tensorflow), assignment_map)
        session.run(tf.global_variables_initializer())
        got = session.run({"f32": by_name, "f64": as_variable, "scope/nested": in_scope, "table": table.as_tensor(),
                           "kept": untouched})
    assert_same({name: got[name] for name in ("f32", "f64", "scope/nested")},
                {name: np.asarray(VALUES[name]) for name in ("f32", "f64", "scope/nested")})
    np.testing.assert_array_equal(got["table"], TABLE)
    np.testing.assert_array_equal(got["kept"], [1.0, 1.0])


def test_init_from_checkpoint_refuses_what_tensorflow_refuses(lib: Any, saved_by_tensorflow: Path) -> None:
    tf = lib
    prefix = str(saved_by_tensorflow / "model.ckpt-7")
    for assignment_map in ({"missing": "f32"}, {"scope": "other/"}, {"f64": "f32"}):
        with tf.Graph().as_default():
            tf.get_variable("f32", [2, 3])
            tf.get_variable("other/nested", [1, 2], tf.int32)
            with pytest.raises(ValueError):
                tf.train.init_from_checkpoint(prefix, assignment_map)
