"""Exported signatures with sparse input against TensorFlow 2.15.1's Estimators: the same programs
(sparse_export_programs) export a model reading a ``SparseFeature`` and a ``VarLenFeature`` through
``build_parsing_serving_input_receiver_fn`` (serialized tf.Examples in) and through a ``ServingInputReceiver``
of ``tf.sparse_placeholder``s (SparseTensor signature inputs, fed through
``tf.saved_model.utils.get_tensor_from_tensor_info``); the loaded exports predict what the Estimator's own
``predict`` does and what TensorFlow's exports predict from the same training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import estimator_oracle
import sparse_export_programs
import tensorgrid

pytestmark = pytest.mark.estimator_oracle
PROGRAMS = sorted(sparse_export_programs.PROGRAMS)


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*PROGRAMS, programs="sparse_export_programs")


@pytest.mark.parametrize("name", PROGRAMS)
def test_sparse_export_program_matches_tensorflow_estimator(name: str, tensorflow_results: dict[str, Any],
                                                            tmp_path: Path) -> None:
    ours = sparse_export_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])
    estimator_oracle.assert_close(ours["export"]["outputs"], ours["predict"])


def test_a_sparse_tensor_info_names_its_three_tensors() -> None:
    tf = tensorgrid
    with tf.Graph().as_default() as graph:
        words = tf.sparse_placeholder(tf.string, [None, None], name="words")
        info = tf.saved_model.utils.build_tensor_info(words)
        assert info.name == "" and info.coo_sparse is not None
        assert info.coo_sparse.indices_tensor_name == words.indices.name
        again = tf.saved_model.utils.get_tensor_from_tensor_info(info, graph)
        assert (again.indices, again.values, again.dense_shape) == (words.indices, words.values, words.dense_shape)
