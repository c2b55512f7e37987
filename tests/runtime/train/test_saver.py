"""Checkpointing: round trips, retention, the state file, and what a crash or corruption leaves.

Crashes are simulated by making the rename of one file fail part-way through a save
(or by leaving a half-written temporary file): the previous checkpoint must still
restore, and ``latest_checkpoint`` must point at a complete one.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.train import checkpoint_format


def _model() -> tuple[tf.Variable, tf.Variable, Any]:
    with tf.variable_scope("dense"):
        w = tf.get_variable("w", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
        b = tf.get_variable("b", initializer=np.float64([0.5, -1.0, 2.0]))
    step = tf.train.get_or_create_global_step()
    return w, b, step


def _set(sess: tf.Session, var: tf.Variable, value: Any) -> None:
    var.load(value, sess)


def test_round_trip_restores_every_variable_exactly(tmp_path: Any, session: tf.Session) -> None:
    w, b, step = _model()
    saver = tf.train.Saver()
    session.run(tf.global_variables_initializer())
    _set(session, step, 42)
    prefix = saver.save(session, str(tmp_path / "model.ckpt"), global_step=step)
    assert prefix == str(tmp_path / "model.ckpt-42")
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.ckpt-42.data", "model.ckpt-42.index",
                                            "model.ckpt-42.meta"]
    session.run(tf.global_variables_initializer())
    saver.restore(session, prefix)
    np.testing.assert_array_equal(session.run(w), np.arange(6).reshape(2, 3))
    assert session.run(b).dtype == np.float64 and session.run(b).tolist() == [0.5, -1.0, 2.0]
    assert session.run(step) == 42


def test_restore_into_a_new_graph_and_session(tmp_path: Any) -> None:
    w, _, _ = _model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        _set(sess, w, np.full((2, 3), 7.0))
        tf.train.Saver().save(sess, str(tmp_path / "m"))
    with tf.Graph().as_default():
        w2, _, _ = _model()
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
            np.testing.assert_array_equal(sess.run(w2), np.full((2, 3), 7.0))


def test_var_list_as_dict_renames_and_as_list_selects(tmp_path: Any, session: tf.Session) -> None:
    w, b, _ = _model()
    session.run(tf.global_variables_initializer())
    tf.train.Saver({"weights": w}).save(session, str(tmp_path / "renamed"))
    reader = tf.train.NewCheckpointReader(str(tmp_path / "renamed"))
    assert reader.get_variable_to_shape_map() == {"weights": [2, 3]}
    np.testing.assert_array_equal(reader.get_tensor("weights"), np.arange(6).reshape(2, 3))
    tf.train.Saver([b]).save(session, str(tmp_path / "subset"))
    assert tf.train.list_variables(str(tmp_path / "subset")) == [("dense/b", [3])]
    np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path / "subset"), "dense/b:0"), [0.5, -1.0, 2.0])


def test_saver_argument_errors() -> None:
    a = tf.Variable(1.0, name="a")
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver([])
    assert tf.train.Saver([], allow_empty=True).save(None, "unused") is None
    with pytest.raises(TypeError, match="Saver can only save Variables"):
        tf.train.Saver([tf.constant(1.0)])
    with tf.Graph().as_default():
        other = tf.Variable(2.0, name="a")
    with pytest.raises(ValueError, match="At least two variables have the same name: a"):
        tf.train.Saver([a, other])


def test_save_into_a_missing_directory_is_an_error(tmp_path: Any, session: tf.Session) -> None:
    """Two missing levels (one is made, as TensorFlow makes it: tests/runtime/oracle/test_tf1_behaviours.py)."""
    _model()
    saver = tf.train.Saver()
    session.run(tf.global_variables_initializer())
    with pytest.raises(ValueError, match="Parent directory of .*missing/sub/model doesn't exist, can't save"):
        saver.save(session, str(tmp_path / "missing" / "sub" / "model"))


def test_restore_ops_are_colocated_with_their_variables() -> None:
    with tf.device("/job:ps/task:1"):
        w = tf.Variable(np.zeros(2), name="w")
    tf.train.Saver()
    graph = tf.get_default_graph()
    assigns = [op for op in graph.get_operations() if op.name.startswith("save/") and op.type == "Assign"]
    feeds = [op for op in graph.get_operations() if op.name.startswith("save/") and op.type == "Placeholder"]
    assert len(assigns) == len(feeds) == 1
    assert assigns[0].device == feeds[0].device == w.device
    assert graph.get_operation_by_name("save/restore_all").type == "NoOp"


# ---------------------------------------------------------------- retention and the state file

def test_max_to_keep_deletes_the_oldest_checkpoints(tmp_path: Any, session: tf.Session) -> None:
    _model()
    saver = tf.train.Saver(max_to_keep=2)
    session.run(tf.global_variables_initializer())
    base = str(tmp_path / "model")
    for step in range(1, 5):
        saver.save(session, base, global_step=step)
    assert saver.last_checkpoints == [f"{base}-3", f"{base}-4"]
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint", "model-3.data", "model-3.index", "model-3.meta", "model-4.data", "model-4.index", "model-4.meta"]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == f"{base}-4"
    assert state.all_model_checkpoint_paths == [f"{base}-3", f"{base}-4"]
    assert tf.train.latest_checkpoint(str(tmp_path)) == f"{base}-4"
    assert tf.train.checkpoint_exists(f"{base}-3") and not tf.train.checkpoint_exists(f"{base}-1")


def test_max_to_keep_none_keeps_everything(tmp_path: Any, session: tf.Session) -> None:
    _model()
    saver = tf.train.Saver(max_to_keep=None)
    session.run(tf.global_variables_initializer())
    for step in range(3):
        saver.save(session, str(tmp_path / "m"), global_step=step)
    assert all(tf.train.checkpoint_exists(str(tmp_path / f"m-{step}")) for step in range(3))


def test_latest_checkpoint_of_an_empty_directory_is_none(tmp_path: Any) -> None:
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    assert tf.train.get_checkpoint_state(str(tmp_path)) is None


def test_relative_save_paths_are_stored_relative_to_the_directory(tmp_path: Any, session: tf.Session,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkdir("ckpt")
    _model()
    saver = tf.train.Saver()
    session.run(tf.global_variables_initializer())
    assert saver.save(session, "ckpt/model", global_step=3) == "ckpt/model-3"
    with open("ckpt/checkpoint") as f:
        text = f.read()
    assert 'model_checkpoint_path: "model-3"\n' in text
    assert tf.train.latest_checkpoint("ckpt") == os.path.join("ckpt", "model-3")


def test_state_files_written_by_tensorflow_parse() -> None:
    from tensorgrid.train import checkpoint_management

    text = (
        'model_checkpoint_path: "/data/run \\"a\\"/model.ckpt-20"\n'
        'all_model_checkpoint_paths: "model.ckpt-10"\n'
        'all_model_checkpoint_paths: "/data/run \\"a\\"/model.ckpt-20"\n'
        "all_model_checkpoint_timestamps: 1700000000.5\n"
        "all_model_checkpoint_timestamps: 1700000100.25\n"
        "last_preserved_timestamp: 1699999999.0\n"
    )
    state = checkpoint_management.parse_checkpoint_state(text)
    assert state.model_checkpoint_path == '/data/run "a"/model.ckpt-20'
    assert state.all_model_checkpoint_paths == ["model.ckpt-10", '/data/run "a"/model.ckpt-20']
    assert state.all_model_checkpoint_timestamps == [1700000000.5, 1700000100.25]
    assert checkpoint_management.parse_checkpoint_state(str(state)) == state


# ---------------------------------------------------------------- crash safety

def _fail_replace_of(monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    real_replace = os.replace

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if str(dst).endswith(suffix):
            raise OSError(f"simulated crash while renaming {dst}")
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def _saved_model(tmp_path: Any, session: tf.Session) -> tuple[tf.Variable, tf.train.Saver, str]:
    w, _, _ = _model()
    saver = tf.train.Saver()
    session.run(tf.global_variables_initializer())
    first = saver.save(session, str(tmp_path / "model"), global_step=1)
    _set(session, w, np.full((2, 3), -5.0))
    return w, saver, first


@pytest.mark.parametrize("crash_at", [".data", ".index", "checkpoint"])
def test_a_crash_during_save_leaves_the_previous_checkpoint_valid(
    crash_at: str, tmp_path: Any, session: tf.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, saver, first = _saved_model(tmp_path, session)
    with monkeypatch.context() as patch:
        _fail_replace_of(patch, crash_at)
        with pytest.raises(OSError, match="simulated crash"):
            saver.save(session, str(tmp_path / "model"), global_step=2)
    latest = tf.train.latest_checkpoint(str(tmp_path))
    # The state file changes last: whatever failed, it still names the first checkpoint.
    assert latest == first
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]
    session.run(tf.global_variables_initializer())
    saver.restore(session, latest)
    np.testing.assert_array_equal(session.run(w), np.arange(6).reshape(2, 3))


def test_a_crash_while_overwriting_the_same_prefix_keeps_the_old_data(
    tmp_path: Any, session: tf.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, _, _ = _model()
    saver = tf.train.Saver()
    session.run(tf.global_variables_initializer())
    prefix = str(tmp_path / "model")
    saver.save(session, prefix)
    _set(session, w, np.full((2, 3), 9.0))
    with monkeypatch.context() as patch:
        _fail_replace_of(patch, ".index")
        with pytest.raises(OSError):
            saver.save(session, prefix)
    saver.restore(session, prefix)
    np.testing.assert_array_equal(session.run(w), np.arange(6).reshape(2, 3))
    # A completed overwrite switches to the other data file and removes the old one.
    _set(session, w, np.full((2, 3), 9.0))
    saver.save(session, prefix)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.data.1", "model.index", "model.meta"]
    session.run(tf.global_variables_initializer())
    saver.restore(session, prefix)
    np.testing.assert_array_equal(session.run(w), np.full((2, 3), 9.0))


def test_partial_files_of_an_interrupted_save_are_ignored(tmp_path: Any, session: tf.Session) -> None:
    w, saver, first = _saved_model(tmp_path, session)
    # What a process killed mid-save leaves: a half-written temporary index and data file.
    (tmp_path / "model-2.data").write_bytes(b"\0" * 10)
    (tmp_path / "model-2.index.tmp-0badc0de").write_text('{"format": "tensorgrid-chec')
    assert tf.train.latest_checkpoint(str(tmp_path)) == first
    assert not tf.train.checkpoint_exists(str(tmp_path / "model-2"))
    saver.restore(session, first)
    np.testing.assert_array_equal(session.run(w), np.arange(6).reshape(2, 3))
    # Saving that step again completes normally, and retention removes the leftovers too.
    saver.save(session, str(tmp_path / "model"), global_step=2)
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]
    tf.train.remove_checkpoint(str(tmp_path / "model-2"))
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model-1.data", "model-1.index", "model-1.meta"]


# ---------------------------------------------------------------- corruption and mismatches

def test_a_flipped_byte_is_detected_naming_the_file(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    data = tmp_path / "model-1.data"
    content = bytearray(data.read_bytes())
    content[5] ^= 0x40
    data.write_bytes(bytes(content))
    with pytest.raises(tf.errors.DataLossError, match=r"Checksum does not match for tensor .* in checkpoint data file .*model-1\.data"):
        saver.restore(session, first)


def test_a_truncated_data_file_is_detected(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    data = tmp_path / "model-1.data"
    data.write_bytes(data.read_bytes()[:-3])
    with pytest.raises(tf.errors.DataLossError, match=r"model-1\.data has \d+ bytes but its index says"):
        saver.restore(session, first)


def test_a_garbled_index_is_detected(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    (tmp_path / "model-1.index").write_bytes(b"\x00garbage")
    with pytest.raises(tf.errors.DataLossError, match=r"Checkpoint index .*model-1\.index is corrupted"):
        saver.restore(session, first)


def test_a_missing_data_file_is_detected(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    os.unlink(tmp_path / "model-1.data")
    with pytest.raises(tf.errors.DataLossError, match=r"model-1\.data .* is missing"):
        saver.restore(session, first)


def test_a_variable_missing_from_the_checkpoint_is_named(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    tf.Variable(1.0, name="added_later")
    with pytest.raises(tf.errors.NotFoundError, match="Key added_later not found in checkpoint"):
        tf.train.Saver().restore(session, first)


def test_a_shape_mismatch_names_both_shapes(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    with tf.Graph().as_default():
        tf.Variable(np.zeros((3, 2), np.float32), name="dense/w")
        other = tf.train.Saver()
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"lhs shape= \[3, 2\] rhs shape= \[2, 3\] \(variable dense/w"):
                other.restore(sess, first)
            tf.train.Saver(reshape=True).restore(sess, first)
            np.testing.assert_array_equal(sess.run("dense/w:0"), np.arange(6).reshape(3, 2))


def test_a_dtype_mismatch_is_an_error(tmp_path: Any, session: tf.Session) -> None:
    _, saver, first = _saved_model(tmp_path, session)
    with tf.Graph().as_default():
        tf.Variable(np.zeros(3, np.float32), name="dense/b")
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="expected dtype float32 does not equal original dtype float64"):
                tf.train.Saver().restore(sess, first)


def test_restoring_a_path_that_is_not_a_checkpoint_is_an_error(tmp_path: Any, session: tf.Session) -> None:
    _model()
    saver = tf.train.Saver()
    with pytest.raises(ValueError, match="The passed save_path is not a valid checkpoint"):
        saver.restore(session, str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="Can't load save_path when it is None"):
        saver.restore(session, None)


def test_data_layout_is_aligned_little_endian_with_crcs(tmp_path: Any) -> None:
    values = {"b": np.arange(3, dtype=">i8"), "a": np.ones((2, 2), np.float32), "c": np.zeros((0, 4)),
              "d": np.array(True)}
    index = checkpoint_format.write_checkpoint(str(tmp_path / "raw"), values)
    assert index.data_file == "raw.data"
    entries = list(index.tensors.values())
    assert [e.name for e in entries] == ["a", "b", "c", "d"]
    assert all(e.offset % checkpoint_format.ALIGNMENT == 0 for e in entries)
    raw = (tmp_path / "raw.data").read_bytes()
    b = index.tensors["b"]
    assert raw[b.offset:b.offset + b.length] == np.arange(3, dtype="<i8").tobytes()
    read = checkpoint_format.read_tensors(checkpoint_format.read_index(str(tmp_path / "raw")), list(values))
    for name, value in values.items():
        np.testing.assert_array_equal(read[name], value)
        assert read[name].shape == value.shape


# ---------------------------------------------------------------- partitioned variables

TABLE = np.arange(30, dtype=np.float32).reshape(10, 3)


def _partitioned_model(lib: Any, parts: int) -> Any:
    """A table in ``parts`` parts (or one whole variable), trained a step by Adam so it has slots."""
    partitioner = lib.fixed_size_partitioner(parts) if parts > 1 else None
    emb = lib.get_variable("emb", [10, 3], initializer=lib.zeros_initializer(), partitioner=partitioner)
    rows = lib.nn.embedding_lookup(emb, [1, 8, 8], partition_strategy="div")
    lib.train.AdamOptimizer(0.1).minimize(lib.reduce_sum(rows), global_step=lib.train.get_or_create_global_step())
    return emb


def _assign_table(sess: Any, emb: Any) -> None:
    sess.run(tf.global_variables_initializer())
    parts = list(emb) if isinstance(emb, tf.PartitionedVariable) else [emb]
    offset = 0
    for part in parts:
        rows = part.get_shape().as_list()[0]
        part.load(TABLE[offset:offset + rows], sess)
        offset += rows


@pytest.mark.parametrize("restore_parts", [2, 1, 3])
def test_a_table_saved_in_three_parts_restores_into_any_number(tmp_path: Any, restore_parts: int) -> None:
    with tf.Graph().as_default():
        emb = _partitioned_model(tf, 3)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            _assign_table(sess, emb)
            slot_before = sess.run(tf.convert_to_tensor(list(emb)[0]))
            prefix = saver.save(sess, str(tmp_path / "model"))
    # One logical tensor per variable and per slot, not one per part.
    assert tf.train.list_variables(prefix) == [
        ("beta1_power", []), ("beta2_power", []), ("emb", [10, 3]), ("emb/Adam", [10, 3]), ("emb/Adam_1", [10, 3]),
        ("global_step", [])]
    np.testing.assert_array_equal(tf.train.load_variable(prefix, "emb"), TABLE)
    np.testing.assert_array_equal(slot_before, TABLE[:4])
    with tf.Graph().as_default():
        emb = _partitioned_model(tf, restore_parts)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.train.Saver().restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(emb)), TABLE)
            parts = list(emb) if restore_parts > 1 else [emb]
            assert [p.get_shape().as_list()[0] for p in parts] == {2: [5, 5], 1: [10], 3: [4, 3, 3]}[restore_parts]


def test_checkpoint_keys_and_shapes_are_those_tensorflow_lists(tmp_path: Any, tf1: Any) -> None:
    listed = []
    for lib, directory in ((tf, tmp_path / "ours"), (tf1, tmp_path / "theirs")):
        directory.mkdir()
        with lib.Graph().as_default():
            _partitioned_model(lib, 3)
            saver = lib.train.Saver()
            with lib.Session() as sess:
                sess.run(lib.global_variables_initializer())
                prefix = saver.save(sess, str(directory / "model"))
        listed.append([(name, list(shape)) for name, shape in lib.train.list_variables(prefix)])
    assert listed[0] == listed[1]


def test_saving_some_parts_of_a_partitioned_variable_is_an_error() -> None:
    emb = tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3))
    with pytest.raises(ValueError, match="needs every part of the partitioned variable emb"):
        tf.train.Saver([list(emb)[0], list(emb)[2]])
    saver = tf.train.Saver({"table": emb})
    assert saver._names == ["table"]
    plain = tf.Variable(1.0, name="emb")
    assert plain.op.name == "emb"
    with pytest.raises(ValueError, match="same name: emb"):
        tf.train.Saver([plain, emb])
