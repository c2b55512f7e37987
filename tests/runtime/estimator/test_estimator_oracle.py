"""tf.estimator against TensorFlow 2.15.1's Estimators: the same programs (estimator_programs), run on
tensorgrid here and on TensorFlow in .venv-estimator-oracle (estimator_oracle), give the same losses
per step, metrics, predictions, checkpoints and event-file folders."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import estimator_oracle
import estimator_programs
import tensorgrid

pytestmark = pytest.mark.estimator_oracle


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*estimator_programs.PROGRAMS)


def assert_close(ours: Any, theirs: Any, path: str = "") -> None:
    """Equal structure and strings; numbers within 1e-4 (both sides round to 5 decimals)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), f"{path}: {ours} != {theirs}"
        for key in theirs:
            assert_close(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list) and theirs and not isinstance(theirs[0], (int, float)):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{path}: {ours} != {theirs}"
        for index, (mine, other) in enumerate(zip(ours, theirs)):
            assert_close(mine, other, f"{path}[{index}]")
    elif isinstance(theirs, (int, float, list)) and not isinstance(theirs, bool):
        np.testing.assert_allclose(ours, theirs, atol=1e-4, err_msg=path)
    else:
        assert ours == theirs, f"{path}: {ours!r} != {theirs!r}"


@pytest.mark.parametrize("name", sorted(estimator_programs.PROGRAMS))
def test_program_matches_tensorflow_estimator(name: str, tensorflow_results: dict[str, Any], tmp_path: Any) -> None:
    ours = estimator_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    assert_close(ours, tensorflow_results[name])
