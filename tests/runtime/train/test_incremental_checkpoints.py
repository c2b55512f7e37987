"""Incremental checkpoints (``Saver(incremental=True)``): deltas of the rows written since the
previous save, beside the last full checkpoint, restored as full + every delta after it.

Each test trains a small partitioned embedding table, saves along the way, and checks what a
user would see: the values a restore gives (against the live ones, and against TensorFlow 2.21
running the same training), how many bytes a delta takes, that a dense write is never missed,
and the errors of a broken chain.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format

ROWS, DIM = 60, 4
INITIAL = np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) / 100.0
BATCHES = [[1, 7, 7, 30], [59, 2], [30, 31, 32], [0], [44, 45, 7]]


OPTIMIZERS = {
    "adagrad": lambda lib: lib.train.AdagradOptimizer(0.1),
    "sgd": lambda lib: lib.train.GradientDescentOptimizer(0.1),
    "momentum": lambda lib: lib.train.MomentumOptimizer(0.1, 0.9),
    "rmsprop": lambda lib: lib.train.RMSPropOptimizer(0.1, momentum=0.5),
    "rmsprop_centered": lambda lib: lib.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True),
    "adadelta": lambda lib: lib.train.AdadeltaOptimizer(1.0),
    "ftrl": lambda lib: lib.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01),
    "proximal_adagrad": lambda lib: lib.train.ProximalAdagradOptimizer(0.1, l1_regularization_strength=0.01),
    "proximal_sgd": lambda lib: lib.train.ProximalGradientDescentOptimizer(0.1, l2_regularization_strength=0.01),
    "adam": lambda lib: lib.train.AdamOptimizer(0.1),
}


def _model(lib: Any, parts: int, optimizer: str = "adagrad") -> dict[str, Any]:
    """A partitioned table trained by the embedding lookup's (sparse) gradient."""
    def initial(shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        first = partition_info.var_offset[0] if partition_info is not None else 0
        return lib.constant(INITIAL[first:first + shape[0]])

    emb = lib.get_variable("emb", [ROWS, DIM], partitioner=lib.fixed_size_partitioner(parts) if parts > 1 else None,
                           initializer=initial)
    ids = lib.placeholder(lib.int64, [None])
    loss = lib.reduce_sum(lib.square(lib.nn.embedding_lookup(emb, ids) - 1.0))
    step = lib.train.get_or_create_global_step()
    opt = OPTIMIZERS[optimizer](lib)
    return {"emb": emb, "ids": ids, "train": opt.minimize(loss, global_step=step), "step": step}


def _whole(sess: Any, emb: Any) -> np.ndarray:
    parts = list(emb) if not isinstance(emb, tf.Variable) else [emb]
    return np.concatenate(sess.run(parts), axis=0)


def _values_by_key(sess: Any) -> dict[str, np.ndarray]:
    """Every global variable's value under its checkpoint key (the parts of ``emb`` and of its slot joined)."""
    parts: dict[str, list[tuple[int, np.ndarray]]] = {}
    for var, value in zip(tf.global_variables(), sess.run(tf.global_variables())):
        info = var._get_save_slice_info()
        key = info.full_name if info is not None else var.op.name
        parts.setdefault(key, []).append((info.var_offset[0] if info is not None else 0, value))
    return {key: np.concatenate([v for _, v in sorted(got, key=lambda p: p[0])]) if len(got) > 1 else got[0][1]
            for key, got in parts.items()}


def _restored(prefix: str, parts: int, optimizer: str = "adagrad") -> dict[str, np.ndarray]:
    with tf.Graph().as_default():
        _model(tf, parts, optimizer)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            return _values_by_key(sess)


def _train_and_save(directory: str, parts: int = 3, full_save_every: int = 10, optimizer: str = "adagrad"
                    ) -> tuple[list[str], dict[str, np.ndarray]]:
    """Saves after the initializer and after every batch; returns the prefixes and the live values."""
    with tf.Graph().as_default():
        m = _model(tf, parts, optimizer)
        saver = tf.train.Saver(incremental=True, full_save_every=full_save_every, max_to_keep=None)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            prefixes = [saver.save(sess, os.path.join(directory, "model"), global_step=0)]
            for batch in BATCHES:
                sess.run(m["train"], {m["ids"]: batch})
                prefixes.append(saver.save(sess, os.path.join(directory, "model"), global_step=m["step"]))
            return prefixes, _values_by_key(sess)


def _data_size(prefix: str) -> int:
    return checkpoint_format.read_index(prefix).data_size


@pytest.mark.parametrize("restore_parts", [3, 2, 1])
def test_full_and_deltas_restore_the_live_values_into_any_partition_count(tmp_path: Any, restore_parts: int) -> None:
    prefixes, live = _train_and_save(str(tmp_path))
    assert tf.train.latest_checkpoint(str(tmp_path)) == prefixes[-1]
    assert checkpoint_format.read_index(prefixes[0]).delta is None
    assert [checkpoint_format.read_index(p).delta.sequence for p in prefixes[1:]] == [1, 2, 3, 4, 5]
    restored = _restored(prefixes[-1], restore_parts)
    assert sorted(restored) == sorted(live)
    for key, value in live.items():
        np.testing.assert_array_equal(restored[key], value, err_msg=key)
    # An earlier delta restores the values of its own step.
    np.testing.assert_array_equal(_restored(prefixes[2], 1)["global_step"], 2)
    np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path), "emb"), live["emb"])


def test_a_delta_holds_only_the_rows_written(tmp_path: Any) -> None:
    prefixes, _ = _train_and_save(str(tmp_path))
    reader = checkpoint_format.read_index(prefixes[1])
    # Batch [1, 7, 7, 30]: three rows of the table and of its Adagrad slot, and the global step.
    assert reader.tensors["emb:rows"].shape == (3,) and reader.tensors["emb:row_values"].shape == (3, DIM)
    assert reader.tensors["emb/Adagrad:rows"].shape == (3,)
    assert sorted(reader.tensors) == ["emb/Adagrad:row_values", "emb/Adagrad:rows", "emb:row_values", "emb:rows",
                                      "global_step"]
    assert _data_size(prefixes[1]) < _data_size(prefixes[0]) / 5


def test_a_full_save_every_n_deltas(tmp_path: Any) -> None:
    prefixes, live = _train_and_save(str(tmp_path), full_save_every=2)
    kinds = ["full" if checkpoint_format.read_index(p).delta is None else "delta" for p in prefixes]
    assert kinds == ["full", "delta", "delta", "full", "delta", "delta"]
    np.testing.assert_array_equal(_restored(prefixes[-1], 2)["emb"], live["emb"])


@pytest.mark.parametrize("optimizer", sorted(set(OPTIMIZERS) - {"adagrad"}))
def test_every_sparse_update_reports_the_rows_of_the_table_and_its_slots(tmp_path: Any, optimizer: str) -> None:
    """A kernel that reports rows must report them for every slot it writes, or the restore differs."""
    prefixes, live = _train_and_save(str(tmp_path), optimizer=optimizer)
    entries = checkpoint_format.read_index(prefixes[1]).tensors
    if optimizer == "adam":  # TF1's sparse Adam decays every row of m and v and moves every row: saved whole
        assert "emb" in entries and "emb/Adam" in entries
    else:
        assert entries["emb:rows"].shape == (3,)
    restored = _restored(prefixes[-1], 2, optimizer)
    assert sorted(restored) == sorted(live)
    for key, value in live.items():
        np.testing.assert_array_equal(restored[key], value, err_msg=key)


@pytest.mark.parametrize("dense_write", ["assign", "assign_add", "in_a_cond"])
def test_a_dense_write_is_saved_whole(tmp_path: Any, dense_write: str) -> None:
    with tf.Graph().as_default():
        m = _model(tf, 2)
        part = list(m["emb"])[1]
        writes = {
            "assign": tf.assign(part, tf.fill(tf.shape(part), 5.0)),
            "assign_add": tf.assign_add(part, tf.ones_like(part)),
            "in_a_cond": tf.cond(tf.constant(True), lambda: tf.assign_add(part, tf.ones_like(part)),
                                 lambda: tf.identity(part)),
        }
        saver = tf.train.Saver(incremental=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            saver.save(sess, str(tmp_path / "model"), global_step=0)
            sess.run(m["train"], {m["ids"]: [2]})  # embedding_lookup's "mod" strategy: row 1 of part 0
            sess.run(writes[dense_write])
            delta = saver.save(sess, str(tmp_path / "model"), global_step=1)
            live = _whole(sess, m["emb"])
    entries = checkpoint_format.read_index(delta).tensors
    # Part 1 (rows 30..59) went whole, as rows; row 1 of part 0 by itself.
    assert entries["emb:rows"].shape == (1 + ROWS // 2,)
    np.testing.assert_array_equal(_restored(delta, 3)["emb"], live)


def test_a_missing_delta_is_a_clear_error(tmp_path: Any) -> None:
    prefixes, _ = _train_and_save(str(tmp_path))
    checkpoint_format.remove_checkpoint(prefixes[2])
    with pytest.raises(tf.errors.DataLossError, match=r"applies to, .*model-2, is missing .*model-2\.index not found"):
        _restored(prefixes[-1], 2)
    with pytest.raises(tf.errors.DataLossError, match="model-2"):
        tf.train.load_variable(prefixes[-1], "emb")


def test_a_corrupt_delta_is_a_clear_error(tmp_path: Any) -> None:
    prefixes, _ = _train_and_save(str(tmp_path))
    index = checkpoint_format.read_index(prefixes[3])
    with open(index.data_path, "r+b") as f:
        f.seek(index.tensors["emb:row_values"].offset)
        f.write(b"\xff\xff\xff\xff")
    with pytest.raises(tf.errors.DataLossError, match=r"Checksum does not match for tensor emb:row_values .*model-3"):
        _restored(prefixes[-1], 3)


def test_a_delta_of_a_chain_that_was_overwritten_is_refused(tmp_path: Any) -> None:
    prefixes, _ = _train_and_save(str(tmp_path))
    checkpoint_format.write_checkpoint(prefixes[1], {"emb": INITIAL})  # model-1 replaced by a full checkpoint
    with pytest.raises(tf.errors.DataLossError, match="delta 2 on model-0, but .*model-1 is a full checkpoint"):
        _restored(prefixes[-1], 3)


def test_max_to_keep_spares_the_chain_of_a_kept_delta(tmp_path: Any) -> None:
    with tf.Graph().as_default():
        m = _model(tf, 2)
        saver = tf.train.IncrementalSaver(full_save_every=3, max_to_keep=2)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step, batch in enumerate(BATCHES * 2):
                sess.run(m["train"], {m["ids"]: batch})
                saver.save(sess, str(tmp_path / "model"), global_step=step)
                for kept in saver.last_checkpoints:
                    checkpoint_chain.read_chain(kept)  # every kept checkpoint's chain is on disk
            live = _values_by_key(sess)
    np.testing.assert_array_equal(_restored(tf.train.latest_checkpoint(str(tmp_path)), 3)["emb"], live["emb"])
    indexes = sorted(n for n in os.listdir(tmp_path) if n.endswith(".index"))
    # Saves 0 (full), 1-3 (deltas), 4 (full), 5-7 (deltas), 8 (full), 9: only 8 and 9 are needed.
    assert indexes == ["model-8.index", "model-9.index"]


def test_a_restored_saver_saves_full_next(tmp_path: Any) -> None:
    prefixes, live = _train_and_save(str(tmp_path))
    with tf.Graph().as_default():
        m = _model(tf, 2)
        saver = tf.train.Saver(incremental=True)
        with tf.Session() as sess:
            saver.restore(sess, prefixes[-1])
            sess.run(m["train"], {m["ids"]: [5]})
            after = saver.save(sess, str(tmp_path / "again"), global_step=m["step"])
            again = saver.save(sess, str(tmp_path / "again"), global_step=m["step"])
            live_after = _whole(sess, m["emb"])
    assert checkpoint_format.read_index(after).delta is None
    assert again == after and checkpoint_format.read_index(again).delta is None  # its own prefix: never a delta of itself
    np.testing.assert_array_equal(_restored(after, 3)["emb"], live_after)


def test_bad_arguments_are_refused() -> None:
    with tf.Graph().as_default():
        tf.Variable(1.0)
        with pytest.raises(ValueError, match="full_save_every must be a positive number .* got 0"):
            tf.train.Saver(incremental=True, full_save_every=0)
        with pytest.raises(TypeError, match="incremental must be True or False, got 'yes'"):
            tf.train.Saver(incremental="yes")


def test_a_monitored_training_session_restores_its_latest_delta(tmp_path: Any) -> None:
    directory = str(tmp_path / "ckpt")

    def run(steps: int) -> tuple[np.ndarray, int]:
        with tf.Graph().as_default():
            m = _model(tf, 3)
            scaffold = tf.train.Scaffold(saver=tf.train.Saver(incremental=True, full_save_every=4))
            with tf.train.MonitoredTrainingSession(checkpoint_dir=directory, scaffold=scaffold,
                                                   save_checkpoint_steps=1, save_checkpoint_secs=None,
                                                   save_summaries_steps=None, log_step_count_steps=None) as sess:
                for batch in BATCHES[:steps]:
                    sess.run(m["train"], {m["ids"]: batch})
                return _whole(sess, m["emb"]), sess.run(m["step"])

    live, step = run(3)
    latest = tf.train.latest_checkpoint(directory)
    assert latest.endswith(f"-{step}") and checkpoint_format.read_index(latest).delta is not None
    np.testing.assert_array_equal(_restored(latest, 2)["emb"], live)
    resumed, _ = run(0)  # a new session restores full + deltas
    np.testing.assert_array_equal(resumed, live)


def test_restored_values_equal_tensorflow_trained_alike(tmp_path: Any, tf1: Any) -> None:
    """TensorFlow 2.21 (the oracle) trains the same partitioned table with the same batches; the
    incremental chain tensorgrid wrote restores (into another partition count) TensorFlow's values."""
    with tf1.Graph().as_default():
        m = _model(tf1, 3)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for batch in BATCHES:
                sess.run(m["train"], {m["ids"]: batch})
            expected = np.concatenate(sess.run(list(m["emb"])))
    prefixes, _ = _train_and_save(str(tmp_path), full_save_every=2)
    np.testing.assert_allclose(_restored(prefixes[-1], 2)["emb"], expected, rtol=1e-6)
