"""``tf.estimator.inputs.numpy_input_fn`` against TensorFlow 2.15.1's (the last with Estimators): the
same programs (numpy_input_programs) give the same batches, static shapes and dtypes, the same
end of input, the same error classes, and an Estimator trained and evaluated through it the same
loss. Shuffled batches are compared as the multiset of rows they hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import estimator_oracle
import numpy_input_programs
import tensorgrid

pytestmark = pytest.mark.estimator_oracle
PROGRAMS = sorted(numpy_input_programs.PROGRAMS)


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*PROGRAMS, programs="numpy_input_programs")


@pytest.mark.parametrize("name", PROGRAMS)
def test_numpy_input_program_matches_tensorflow(name: str, tensorflow_results: dict[str, Any], tmp_path: Path) -> None:
    ours = numpy_input_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])
