"""A Saver made with ``defer_build=True`` (as the Estimator makes its own) is built by
``Scaffold.finalize``, as TensorFlow's Scaffold builds it (TensorFlow 2.21's ``tf.compat.v1`` is the
oracle); and the meta graph each checkpoint save writes leaves the savers collection out without a
log line at INFO, where a collection of other Python objects is still reported."""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def save_then_restore(tf: Any, saver: Any, variable: Any, zero: Any, prefix: str) -> float:
    """The variable's value saved, overwritten with ``zero``, then restored."""
    with tf.Session() as session:
        session.run(variable.initializer)
        path = saver.save(session, prefix)
        session.run(zero)
        saver.restore(session, path)
        return float(session.run(variable))


@pytest.mark.parametrize("given", ["in the savers collection", "to the Scaffold"])
def test_finalize_builds_a_deferred_saver(lib: Any, given: str, tmp_path: Any) -> None:
    variable = lib.Variable(3.5, name="v")
    zero = variable.assign(0.0)
    saver = lib.train.Saver(defer_build=True)
    if given == "in the savers collection":
        lib.add_to_collection(lib.GraphKeys.SAVERS, saver)
        scaffold = lib.train.Scaffold()
    else:
        scaffold = lib.train.Scaffold(saver=saver)
    scaffold.finalize()
    assert scaffold.saver is saver
    assert save_then_restore(lib, saver, variable, zero, str(tmp_path / "model")) == 3.5


def test_a_deferred_saver_unbuilt_cannot_save(lib: Any, tmp_path: Any) -> None:
    variable = lib.Variable(1.0)
    saver = lib.train.Saver(defer_build=True)
    with pytest.raises(RuntimeError, match="build"):
        save_then_restore(lib, saver, variable, variable.assign(0.0), str(tmp_path / "model"))


def test_checkpoint_meta_graph_leaves_savers_out_quietly(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    with tensorgrid.Graph().as_default():
        variable = tensorgrid.Variable(2.0, name="v")
        saver = tensorgrid.train.Saver()
        tensorgrid.add_to_collection(tensorgrid.GraphKeys.SAVERS, saver)
        tensorgrid.add_to_collection("python_objects", object())
        with caplog.at_level(logging.INFO, logger="tensorgrid.train"):
            with tensorgrid.Session() as session:
                session.run(variable.initializer)
                path = saver.save(session, str(tmp_path / "model"))
    reported = [record.getMessage() for record in caplog.records if "cannot name" in record.getMessage()]
    assert reported == ["Collection 'python_objects' holds objects a meta graph cannot name; it is left out"]
    with tensorgrid.Graph().as_default():
        restorer = tensorgrid.train.import_meta_graph(path + ".meta")
        with tensorgrid.Session() as session:
            restorer.restore(session, path)
            assert session.run("v:0") == 2.0
