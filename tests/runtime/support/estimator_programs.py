"""Programs written for TensorFlow 1.x's ``tf.estimator`` that the estimator tests run twice: on
tensorgrid in the test process and on TensorFlow 2.15.1's Estimators in .venv-estimator-oracle
(``estimator_oracle.py``). Each is the text of a function ``run(tf, model_dir)`` returning what
a user would look at, as JSON-able values: losses, metrics, predictions, global steps, files.
The same text runs on both: only the ``tf`` it is given differs.
"""

from __future__ import annotations

from typing import Any

COMMON = '''
import json
import os

import numpy as np

FEATURES = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 0.5], [0.5, 3.0], [1.5, 1.5], [2.5, 2.0]], np.float32)
LABELS = (FEATURES @ np.array([[0.7], [-0.3]], np.float32) + 0.2).astype(np.float32)


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": FEATURES}, LABELS)).repeat().batch(3)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": FEATURES}, LABELS)).batch(4)


def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices({"x": FEATURES[:4]}).batch(3)


def tuple_input_fn():
    return {"x": tf.constant(FEATURES)}, tf.constant(LABELS)


def linear_model_fn(features, labels, mode, params):
    w = tf.get_variable("w", [2, 1], initializer=tf.constant_initializer([[0.1], [0.2]]))
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    prediction = tf.matmul(features["x"], w) + b
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": prediction, "twice": 2.0 * prediction})
    loss = tf.losses.mean_squared_error(labels, prediction)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": tf.metrics.mean_absolute_error(labels, prediction),
            "rmse": tf.metrics.root_mean_squared_error(labels, prediction)})
    optimizer = tf.train.GradientDescentOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def dnn_model_fn(features, labels, mode):
    hidden = tf.layers.dense(features["x"], 3, activation=tf.nn.relu,
                             kernel_initializer=tf.constant_initializer([[0.3, -0.2, 0.5], [0.1, 0.4, -0.3]]),
                             bias_initializer=tf.constant_initializer(0.1))
    prediction = tf.layers.dense(hidden, 1, kernel_initializer=tf.constant_initializer([[0.2], [0.5], [-0.4]]))
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=prediction)
    loss = tf.losses.mean_squared_error(labels, prediction)
    train_op = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class LossRecorder(tf.train.SessionRunHook):
    """The loss of every training step, as a user's hook sees it."""

    def __init__(self):
        self.losses = []

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(tf.get_collection(tf.GraphKeys.LOSSES)[0])

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def files_of(model_dir):
    """What a user sees in model_dir: the checkpoints the state file lists, and which folders have event files."""
    state = tf.train.get_checkpoint_state(model_dir)
    checkpoints = [os.path.basename(path) for path in state.all_model_checkpoint_paths] if state else []
    event_dirs = sorted(os.path.relpath(root, model_dir) for root, _, names in os.walk(model_dir)
                        if any(name.startswith("events.out.tfevents") for name in names))
    return {"checkpoints": checkpoints, "event_dirs": event_dirs}


def rounded(value):
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [rounded(item) for item in value]
    if isinstance(value, (bytes, str)):
        return value if isinstance(value, str) else value.decode()
    array = np.asarray(value)
    return array.astype(float).round(5).tolist() if array.dtype.kind == "f" else array.tolist()
'''

PROGRAMS: dict[str, str] = {
    "linear_train_evaluate_predict": '''
def run(model_dir):
    estimator = tf.estimator.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.05})
    recorder = LossRecorder()
    estimator.train(train_input_fn, steps=5, hooks=[recorder])
    after_first = estimator.latest_checkpoint()
    estimator.train(train_input_fn, max_steps=8, hooks=[recorder])
    skipped = estimator.train(train_input_fn, max_steps=8, hooks=[recorder]) is estimator
    first_batches = estimator.evaluate(eval_input_fn, steps=1)
    whole = estimator.evaluate(eval_input_fn, name="holdout")
    predictions = list(estimator.predict(predict_input_fn))
    only_y = list(estimator.predict(predict_input_fn, predict_keys=["y"]))
    batches = list(estimator.predict(predict_input_fn, yield_single_examples=False))
    return rounded({
        "losses": recorder.losses, "after_first": os.path.basename(after_first), "skipped": skipped,
        "latest": os.path.basename(estimator.latest_checkpoint()),
        "eval_one_batch": first_batches, "eval_whole": whole,
        "predictions": predictions, "only_y": only_y, "batch_sizes": [len(batch["y"]) for batch in batches],
        "w": estimator.get_variable_value("w"), "b": estimator.get_variable_value("b"),
        "variables": sorted(name for name in estimator.get_variable_names() if name in ("w", "b", "global_step")),
        "files": files_of(model_dir)})
''',
    "dnn_tuple_input_and_run_config": '''
def run(model_dir):
    config = tf.estimator.RunConfig(save_checkpoints_steps=3, save_summary_steps=2, keep_checkpoint_max=2)
    estimator = tf.estimator.Estimator(dnn_model_fn, model_dir=model_dir, config=config)
    recorder = LossRecorder()
    estimator.train(tuple_input_fn, steps=7, hooks=[recorder])
    evaluated = estimator.evaluate(tuple_input_fn, steps=2)
    predictions = list(estimator.predict(predict_input_fn))
    return rounded({"losses": recorder.losses, "eval": evaluated, "predictions": predictions,
                    "files": files_of(model_dir), "model_dir_is_config's": estimator.config.model_dir == model_dir})
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    scope: dict[str, Any] = {"tf": tf}
    exec(compile(program_text(name), f"<estimator program {name}>", "exec"), scope)
    try:
        return scope["run"](model_dir)
    except Exception as error:  # noqa: BLE001 - the error's class is part of what the two libraries must share
        return {"error": type(error).__name__, "message": str(error)}
