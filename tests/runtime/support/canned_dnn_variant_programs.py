"""Programs for the canned DNN estimators' batch normalization and partitioned input layers, run on
tensorgrid in the test process and on TensorFlow 2.15.1's Estimators in .venv-estimator-oracle
(``estimator_oracle.py canned_dnn_variant_programs ...``), with the helpers of
``canned_estimator_programs`` (``FixedStart``, ``trained``, the data and columns).

The ``fixed_start`` programs set every trainable variable to the same values on both libraries,
so losses, metrics, predictions and the checkpoint's values (the batch normalization's moving
statistics among them) are compared number for number; ``batch_norm_random_start`` keeps TF's
random start and compares the variables' names and shapes, and that training learns.
"""

from __future__ import annotations

from typing import Any

import canned_estimator_programs
import estimator_programs

PROGRAMS: dict[str, str] = {
    "dnn_classifier_batch_norm_fixed_start": '''
def run(model_dir):
    _, deep = columns()
    start = FixedStart()
    estimator = tf.estimator.DNNClassifier([4, 3], deep, model_dir=model_dir, weight_column="w", batch_norm=True)
    result = trained(estimator, CLICKED, hooks=[start])
    result["trainable"] = start.names
    return rounded(result)
''',
    "dnn_regressor_batch_norm_fixed_start": '''
def run(model_dir):
    _, deep = columns()
    estimator = tf.estimator.DNNRegressor([3], deep[:2], model_dir=model_dir, batch_norm=True,
                                          activation_fn=tf.nn.tanh, optimizer="SGD")
    return rounded(trained(estimator, VALUE, steps=4, hooks=[FixedStart()]))
''',
    "dnn_classifier_partitioned_input_layer_fixed_start": '''
def run(model_dir):
    _, deep = columns()
    start = FixedStart()
    estimator = tf.estimator.DNNClassifier([3], deep, model_dir=model_dir, n_classes=3,
                                           label_vocabulary=["low", "mid", "high"],
                                           input_layer_partitioner=tf.fixed_size_partitioner(2))
    result = trained(estimator, LEVEL, hooks=[start])
    result["trainable"] = start.names
    return rounded(result)
''',
    "dnn_linear_combined_partitioned_batch_norm_fixed_start": '''
def run(model_dir):
    wide, deep = columns()
    start = FixedStart()
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[4, 2],
        batch_norm=True, input_layer_partitioner=tf.min_max_variable_partitioner(max_partitions=2, min_slice_size=16))
    result = trained(estimator, CLICKED, hooks=[start])
    result["trainable"] = start.names
    return rounded(result)
''',
    "batch_norm_random_start": '''
def run(model_dir):
    _, deep = columns()
    estimator = tf.estimator.DNNClassifier([8, 4], deep, model_dir=model_dir, batch_norm=True,
                                           optimizer=tf.train.AdagradOptimizer(0.3))
    recorder = LossRecorder()
    estimator.train(train_input(CLICKED), steps=40, hooks=[recorder])
    metrics = estimator.evaluate(eval_input(CLICKED))
    first, last = np.mean(recorder.losses[:5]), np.mean(recorder.losses[-5:])
    moving_mean = estimator.get_variable_value("dnn/hiddenlayer_0/batchnorm_0/moving_mean")
    return rounded({"loss_fell": bool(last < first), "metric_keys": sorted(metrics),
                    "moving_mean_moved": bool(np.abs(moving_mean).max() > 0),
                    "variables": variables_of(estimator)["variables"], "slots": variables_of(estimator)["slots"]})
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with the canned programs' helpers."""
    return canned_estimator_programs.COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<canned DNN program {name}>", model_dir)
