"""``Saver.save`` writes the graph beside the checkpoint (``<prefix>.meta``, tensorgrid's meta graph
format), so a TF1 program restores a model without its code: ``import_meta_graph(latest + ".meta")``
then ``saver.restore``. The same program runs on TensorFlow 2.21 (the oracle)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TensorFlow's TF1 API (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def _train_and_save(lib: Any, directory: str, **save_args: Any) -> tuple[np.ndarray, list[str]]:
    """A small model trained one step, saved at steps 1 and 2; returns its output and the saved prefixes."""
    with lib.Graph().as_default():
        x = lib.placeholder(lib.float32, [None, 2], name="x")
        weights = lib.Variable([[1.0], [2.0]], name="weights")
        global_step = lib.train.get_or_create_global_step()
        out = lib.identity(lib.matmul(x, weights), name="out")
        train = lib.train.GradientDescentOptimizer(0.1).minimize(lib.reduce_sum(out), global_step=global_step)
        lib.add_to_collection("trainer", train)
        saver = lib.train.Saver(max_to_keep=1)
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            prefixes = [saver.save(sess, os.path.join(directory, "model"), global_step=global_step, **save_args)]
            sess.run(train, {x: [[1.0, 1.0]]})
            prefixes.append(saver.save(sess, os.path.join(directory, "model"), global_step=global_step, **save_args))
            return sess.run(out, {x: [[1.0, 3.0]]}), prefixes


def test_a_checkpoint_restores_into_the_graph_of_its_meta_file(lib: Any, tmp_path: Any) -> None:
    expected, prefixes = _train_and_save(lib, str(tmp_path))
    assert sorted(p for p in os.listdir(tmp_path) if p.endswith(".meta")) == ["model-1.meta"]
    assert prefixes == [str(tmp_path / "model-0"), str(tmp_path / "model-1")]
    with lib.Graph().as_default() as graph:
        latest = lib.train.latest_checkpoint(str(tmp_path))
        saver = lib.train.import_meta_graph(latest + ".meta")
        with lib.Session() as sess:
            saver.restore(sess, latest)
            x = graph.get_tensor_by_name("x:0")
            out = graph.get_tensor_by_name("out:0")
            np.testing.assert_allclose(sess.run(out, {x: [[1.0, 3.0]]}), expected)
            assert sess.run(lib.train.get_global_step()) == 1
            (train,) = lib.get_collection("trainer")
            sess.run(train, {x: [[1.0, 1.0]]})
            assert sess.run(lib.train.get_global_step()) == 2


def test_write_meta_graph_false_writes_none(lib: Any, tmp_path: Any) -> None:
    _train_and_save(lib, str(tmp_path), write_meta_graph=False)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".meta")]


def test_saver_export_meta_graph(lib: Any, tmp_path: Any) -> None:
    with lib.Graph().as_default():
        lib.Variable(1.0, name="v")
        saver = lib.train.Saver()
        saver.export_meta_graph(str(tmp_path / "graph.meta"))
    with lib.Graph().as_default() as graph:
        lib.train.import_meta_graph(str(tmp_path / "graph.meta"))
        assert [v.op.name for v in lib.global_variables()] == ["v"]
        assert graph.get_tensor_by_name("v:0").dtype.base_dtype == lib.float32
