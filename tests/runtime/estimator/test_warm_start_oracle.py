"""Estimator(warm_start_from=...) and WarmStartSettings against TensorFlow 2.15.1's Estimators: the same
programs (warm_start_programs) start the same variables from the same checkpoint tensors (a model
directory, a checkpoint, an export; a regex over the trainable variables, a list of scopes over the
global ones, renamed variables, a variable partitioned now and not before) and fail with the same
error classes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import estimator_oracle
import tensorgrid
import warm_start_programs

pytestmark = pytest.mark.estimator_oracle
PROGRAMS = sorted(warm_start_programs.PROGRAMS)


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*PROGRAMS, programs="warm_start_programs")


@pytest.mark.parametrize("name", PROGRAMS)
def test_warm_start_program_matches_tensorflow_estimator(name: str, tensorflow_results: dict[str, Any],
                                                         tmp_path: Path) -> None:
    ours = warm_start_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])


def test_a_second_training_resumes_from_its_own_checkpoint_not_the_warm_start(tmp_path: Path) -> None:
    tf = tensorgrid
    first = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path / "first"))
    second_dir = str(tmp_path / "second")

    def input_fn() -> Any:
        return {"x": tf.constant([[1.0], [2.0]])}, tf.constant([[1.0], [3.0]])

    first.train(input_fn, steps=3)
    second = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=second_dir,
                                          warm_start_from=str(tmp_path / "first"))
    second.train(input_fn, steps=2)
    after_two = second.get_variable_value("linear/linear_model/x/weights")
    again = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=second_dir,
                                         warm_start_from=str(tmp_path / "first"))
    again.train(input_fn, steps=1)
    assert again.get_variable_value("global_step") == 3
    assert not (again.get_variable_value("linear/linear_model/x/weights") == after_two).all()
    assert not (again.get_variable_value("linear/linear_model/x/weights")
                == first.get_variable_value("linear/linear_model/x/weights")).all()
