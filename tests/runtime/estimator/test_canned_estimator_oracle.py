"""The canned estimators against TensorFlow 2.15.1's: the same programs (canned_estimator_programs),
run on tensorgrid here and on TensorFlow in .venv-estimator-oracle (estimator_oracle), give the
same training losses, metrics, predictions (keys, dtypes, shapes, values), checkpoint variables
and error classes. The DNN programs start from values both libraries set alike (FixedStart);
``dnn_random_start`` keeps the random start and compares structure and that training learns."""

from __future__ import annotations

from typing import Any

import pytest

import canned_estimator_programs
import estimator_oracle
import tensorgrid

pytestmark = pytest.mark.estimator_oracle


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*canned_estimator_programs.PROGRAMS,
                                              programs="canned_estimator_programs")


@pytest.mark.parametrize("name", sorted(canned_estimator_programs.PROGRAMS))
def test_canned_estimator_matches_tensorflow(name: str, tensorflow_results: dict[str, Any], tmp_path: Any) -> None:
    ours = canned_estimator_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])
