"""Warm-starting with vocabulary remapping (``tf.estimator.VocabInfo``) against TensorFlow 2.15.1's
Estimators: the same programs (warm_start_vocab_programs) give the same warm-started variables, rows
(an embedding, linear weights, a partitioned variable, an old vocabulary cut short) and columns (a
multi-class output layer) taken by vocabulary entry, the others from the backup initializer, and the
same error classes. Then what TensorFlow cannot be asked: the remapping of a plain array."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import estimator_oracle
import tensorgrid
import warm_start_vocab_programs
from tensorgrid.train import vocab_remapping


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*warm_start_vocab_programs.PROGRAMS, programs="warm_start_vocab_programs")


@pytest.mark.estimator_oracle
@pytest.mark.parametrize("name", sorted(warm_start_vocab_programs.PROGRAMS))
def test_vocabulary_warm_start_matches_tensorflow(name: str, tensorflow_results: dict[str, Any],
                                                  tmp_path: Path) -> None:
    ours = warm_start_vocab_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    assert "error" not in tensorflow_results[name], tensorflow_results[name]
    estimator_oracle.assert_close(ours, tensorflow_results[name])


def vocabularies(tmp_path: Path, old: list[str], new: list[str]) -> tuple[str, str]:
    (tmp_path / "old").write_text("\n".join(old) + "\n")
    (tmp_path / "new").write_text("\n".join(new) + "\n")
    return str(tmp_path / "new"), str(tmp_path / "old")


def test_rows_follow_their_entries_and_the_rest_are_marked_missing(tmp_path: Path) -> None:
    new, old = vocabularies(tmp_path, ["a", "b", "c"], ["c", "x", "a", "b"])
    old_value = np.array([[1.0, 1.5], [2.0, 2.5], [3.0, 3.5], [9.0, 9.5]], np.float32)  # a, b, c, then OOV
    value, found = vocab_remapping.remapped_value(
        vocab_remapping.VocabInfo(new, 4, 2, old, old_vocab_size=2), old_value, [6, 2])
    np.testing.assert_array_equal(value, [[0, 0], [0, 0], [1.0, 1.5], [2.0, 2.5], [0, 0], [0, 0]])
    np.testing.assert_array_equal(found[:, 0], [False, False, True, True, False, False])


def test_columns_follow_their_entries_with_axis_1(tmp_path: Path) -> None:
    new, old = vocabularies(tmp_path, ["low", "high"], ["high", "mid"])
    value, found = vocab_remapping.remapped_value(
        vocab_remapping.VocabInfo(new, 2, 0, old, axis=1), np.array([[1.0, 2.0], [3.0, 4.0]]), [2, 2])
    np.testing.assert_array_equal(value, [[2.0, 0.0], [4.0, 0.0]])
    np.testing.assert_array_equal(found, [[True, False], [True, False]])


@pytest.mark.parametrize("info_args, shape, message", [
    ((3, 0), [2], "rank 2"),
    ((3, 0), [4, 1], "new_vocab_size \\(3\\) \\+ num_oov_buckets \\(0\\) = 3"),
    ((5, 0), [5, 1], "has 4 entries, fewer than its size 5"),
    ((4, -1), [3, 1], "num_oov_buckets must be >= 0"),
])
def test_bad_remappings_say_what_is_wrong(tmp_path: Path, info_args: tuple[int, int], shape: list[int],
                                         message: str) -> None:
    new, old = vocabularies(tmp_path, ["a", "b"], ["a", "b", "c", "d"])
    with pytest.raises(ValueError, match=message):
        vocab_remapping.remapped_value(vocab_remapping.VocabInfo(new, *info_args, old), np.zeros([2, 1]), shape)
