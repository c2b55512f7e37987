"""Tables are initialized by the training sessions, as in TensorFlow: the default
``local_init_op`` of ``Scaffold`` and of ``Supervisor`` runs ``tf.tables_initializer()``
beside the local variables' initializer, so a program using vocabulary tables (feature
columns) needs no initializer call of its own.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def _ids(tf: Any) -> Any:
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(["a", "b"], tf.constant([0, 1], tf.int64)), 2)
    return table.lookup(tf.constant(["b", "zz", "a"]))


def test_monitored_training_session_initializes_tables(lib: Any) -> None:
    ids = _ids(lib)
    lib.train.get_or_create_global_step()
    with lib.train.MonitoredTrainingSession() as session:
        assert session.run(ids).tolist()[::2] == [1, 0]


def test_supervisor_initializes_tables(lib: Any, tmp_path: Any) -> None:
    ids = _ids(lib)
    lib.train.get_or_create_global_step()
    supervisor = lib.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, save_summaries_secs=0)
    with supervisor.managed_session() as session:
        assert session.run(ids).tolist()[::2] == [1, 0]
