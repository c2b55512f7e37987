"""Estimator exports of the TRAIN and EVAL graphs against TensorFlow 2.15.1's Estimators: the same programs
(supervised_export_programs) export with ``experimental_mode`` and ``experimental_export_all_saved_models``
over the supervised input receivers, and load back meta graphs tagged as TensorFlow tags them ('train',
'eval', 'serve') with the same signatures (keys, methods, inputs, outputs), the same loss, metrics and
predictions for the same data, the same loss after training steps run from the loaded TRAIN graph, and
the same error classes. Each library loads its own export: tensorgrid's format is its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import estimator_oracle
import supervised_export_programs
import tensorgrid

pytestmark = pytest.mark.estimator_oracle
PROGRAMS = sorted(supervised_export_programs.PROGRAMS)


@pytest.fixture(scope="module")
def tensorflow_results() -> dict[str, Any]:
    return estimator_oracle.run_on_tensorflow(*PROGRAMS, programs="supervised_export_programs")


@pytest.mark.parametrize("name", PROGRAMS)
def test_supervised_export_program_matches_tensorflow_estimator(name: str, tensorflow_results: dict[str, Any],
                                                                tmp_path: Path) -> None:
    ours = supervised_export_programs.run_program(tensorgrid, name, str(tmp_path))
    assert "error" not in ours, ours
    estimator_oracle.assert_close(ours, tensorflow_results[name])


def test_an_unknown_mode_beside_known_ones_is_refused_by_name(tmp_path: Path) -> None:
    tf = tensorgrid
    estimator = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path))
    estimator.train(lambda: ({"x": tf.constant([[1.0], [2.0]])}, tf.constant([[1.0], [3.0]])), steps=1)
    receiver_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.placeholder(tf.float32, [None, 1])})
    with pytest.raises(ValueError, match=r"\['training'\] are not tf.estimator.ModeKeys"):
        estimator.experimental_export_all_saved_models(str(tmp_path / "export"), {
            tf.estimator.ModeKeys.PREDICT: receiver_fn, "training": receiver_fn})


def test_single_tensors_are_received_as_input_and_label_with_the_default_batch_size() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        receiver_fn = tf.estimator.experimental.build_raw_supervised_input_receiver_fn(
            tf.placeholder(tf.float32, [None, 2]), tf.placeholder(tf.int64, [None, 1]), default_batch_size=5)
        receiver = receiver_fn()
    assert sorted(receiver.receiver_tensors) == ["input", "label"]
    assert receiver.features.get_shape().as_list() == [5, 2] and receiver.labels.dtype == tf.int64
