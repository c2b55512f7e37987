"""tf.estimator against TensorFlow 2.15.1's Estimators: the same programs (estimator_programs), run on
tensorgrid here and on TensorFlow in .venv-estimator-oracle (estimator_oracle), give the same losses
per step, metrics, predictions, checkpoints and event-file folders."""

from __future__ import annotations

from typing import Any

import pytest

import estimator_oracle
import estimator_programs
import tensorgrid

pytestmark = pytest.mark.estimator_oracle


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*estimator_programs.PROGRAMS)


@pytest.mark.parametrize("name", sorted(estimator_programs.PROGRAMS))
def test_program_matches_tensorflow_estimator(name: str, tensorflow_results: dict[str, Any], tmp_path: Any) -> None:
    ours = estimator_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])
