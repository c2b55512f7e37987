"""Estimator.export_saved_model, the serving input receivers and the Exporters against TensorFlow 2.15.1's
Estimators: the same programs (export_programs) give the same signatures (keys, methods, inputs,
outputs), the same outputs from the loaded export as from the Estimator's own predict, the same
exporter directories, and the same error classes. The files differ: tensorgrid's format is its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import estimator_oracle
import export_programs
import tensorgrid

pytestmark = pytest.mark.estimator_oracle
EXPORT_PROGRAMS = sorted(export_programs.PROGRAMS)


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*EXPORT_PROGRAMS, programs="export_programs")


@pytest.mark.parametrize("name", EXPORT_PROGRAMS)
def test_export_program_matches_tensorflow_estimator(name: str, tensorflow_results: dict[str, Any],
                                                     tmp_path: Path) -> None:
    ours = export_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])
    if "outputs" in ours and "predict" in ours:  # the loaded export answers as the Estimator predicts
        estimator_oracle.assert_close(next(iter(ours["outputs"].values())), ours["predict"])


def test_a_tensorflow_saved_model_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01")
    with tensorgrid.Graph().as_default() as graph, tensorgrid.Session(graph=graph) as session:
        with pytest.raises(OSError, match="TensorFlow SavedModel"):
            tensorgrid.saved_model.loader.load(session, [tensorgrid.saved_model.tag_constants.SERVING], str(tmp_path))
