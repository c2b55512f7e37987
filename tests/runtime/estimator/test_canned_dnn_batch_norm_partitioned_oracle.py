"""The canned DNN estimators with ``batch_norm=True`` and partitioned input layers against TensorFlow
2.15.1's: the same programs (canned_dnn_variant_programs), run on tensorgrid here and on TensorFlow
in .venv-estimator-oracle (estimator_oracle), give the same training losses, metrics, predictions
and checkpoint variables (``dnn/hiddenlayer_<i>/batchnorm_<i>/gamma``, ``beta``, ``moving_mean``,
``moving_variance``; partitioned embeddings and linear weights), and a randomly started
batch-normalized classifier learns on both."""

from __future__ import annotations

from typing import Any

import pytest

import canned_dnn_variant_programs
import estimator_oracle
import tensorgrid

pytestmark = pytest.mark.estimator_oracle


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*canned_dnn_variant_programs.PROGRAMS,
                                              programs="canned_dnn_variant_programs")


@pytest.mark.parametrize("name", sorted(canned_dnn_variant_programs.PROGRAMS))
def test_canned_dnn_variant_matches_tensorflow(name: str, tensorflow_results: dict[str, Any], tmp_path: Any) -> None:
    ours = canned_dnn_variant_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    assert "error" not in tensorflow_results[name], tensorflow_results[name]
    estimator_oracle.assert_close(ours, tensorflow_results[name])


def test_batch_norm_random_start_learns(tmp_path: Any) -> None:
    ours = canned_dnn_variant_programs.run_program(tensorgrid, "batch_norm_random_start", str(tmp_path))
    assert ours["loss_fell"] and ours["moving_mean_moved"], ours
    assert ours["variables"]["dnn/hiddenlayer_1/batchnorm_1/moving_variance"] == [4]
