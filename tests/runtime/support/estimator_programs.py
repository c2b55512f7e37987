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
    "run_config_from_tf_config": '''
CLUSTER = {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"], "worker": ["host3:2222", "host4:2222"]}
TF_CONFIGS = [
    {},
    {"cluster": CLUSTER, "task": {"type": "chief", "index": 0}},
    {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}},
    {"cluster": CLUSTER, "task": {"type": "ps", "index": 1}},
    {"cluster": CLUSTER, "task": {"type": "evaluator", "index": 0}},
    {"cluster": {"chief": ["host0:2222"]}, "task": {"type": "chief", "index": 0}},
    {"cluster": {"master": ["host0:2222"], "worker": ["host3:2222"]}, "task": {"type": "worker", "index": 0}},
    {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}, "model_dir": "/tmp/from_tf_config"},
    {"cluster": {"ps": ["host1:2222"], "worker": ["host3:2222"]}, "task": {"type": "worker", "index": 0}},
    {"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}},
    {"cluster": CLUSTER, "task": {"index": 0}},
    {"cluster": CLUSTER, "task": {"type": "worker"}},
    {"cluster": CLUSTER, "task": {"type": "worker", "index": -1}},
    {"cluster": CLUSTER, "task": {"type": "trainer", "index": 0}},
    {"cluster": CLUSTER, "task": {"type": "worker", "index": 2}},
    {"task": {"type": "chief", "index": 0}},
    {"task": {"type": "worker", "index": 1}},
    {"cluster": {"master": ["a:1"], "chief": ["b:1"]}, "task": {"type": "master", "index": 0}},
    {"cluster": {"master": ["a:1"]}, "task": {"type": "evaluator", "index": 0}},
]
PROPERTIES = ["task_type", "task_id", "master", "evaluation_master", "is_chief", "num_ps_replicas",
              "num_worker_replicas", "global_id_in_cluster", "model_dir", "save_checkpoints_secs",
              "save_checkpoints_steps", "save_summary_steps", "keep_checkpoint_max", "log_step_count_steps"]


def described(make):
    try:
        config = make()
    except Exception as error:
        return {"error": type(error).__name__}
    described = {name: getattr(config, name) for name in PROPERTIES}
    described["cluster"] = config.cluster_spec.as_dict()
    described["device_filters"] = list(config.session_config.device_filters) if config.session_config else None
    return described


def run(model_dir):
    results = []
    for tf_config in TF_CONFIGS:
        os.environ["TF_CONFIG"] = json.dumps(tf_config)
        try:
            results.append(described(tf.estimator.RunConfig))
        finally:
            del os.environ["TF_CONFIG"]
    results.append(described(lambda: tf.estimator.RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=10)))
    results.append(described(lambda: tf.estimator.RunConfig(save_checkpoints_steps=10, keep_checkpoint_max=3,
                                                            log_step_count_steps=7, model_dir="/tmp/m")))
    results.append(described(lambda: tf.estimator.RunConfig(save_checkpoints_secs=None, save_summary_steps=0)))
    results.append(described(lambda: tf.estimator.RunConfig(model_dir="")))
    results.append(described(lambda: tf.estimator.RunConfig(log_step_count_steps=0)))
    results.append(described(lambda: tf.estimator.RunConfig().replace(save_checkpoints_steps=5)))
    results.append(described(lambda: tf.estimator.RunConfig().replace(save_checkpoints_steps=5,
                                                                      save_checkpoints_secs=5)))
    results.append(described(lambda: tf.estimator.RunConfig().replace(task_type="ps")))
    return rounded(results)
''',
    "argument_and_spec_errors": '''
def attempt(action):
    try:
        action()
    except Exception as error:
        return type(error).__name__
    return "no error"


def spec(**kwargs):
    def build():
        x = tf.constant([[1.0], [2.0]])
        w = tf.get_variable("w_spec", [1, 1])
        made = {"loss": tf.reduce_sum(x * w), "train_op": tf.no_op(), "predictions": x * w,
                "vector": tf.reshape(x, [2]), "not a tensor": 3.0}
        mode = kwargs.pop("mode")
        tf.estimator.EstimatorSpec(mode, **{key: made[value] for key, value in kwargs.items()})
    return lambda: (tf.reset_default_graph(), build())


def features_only(features):
    return None


def run(model_dir):
    modes = tf.estimator.ModeKeys
    estimator = tf.estimator.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.05})
    cases = {
        "train without train_op": spec(mode=modes.TRAIN, loss="loss"),
        "train without loss": spec(mode=modes.TRAIN, train_op="train_op"),
        "eval without loss": spec(mode=modes.EVAL, predictions="predictions"),
        "predict without predictions": spec(mode=modes.PREDICT, loss="loss"),
        "loss not scalar": spec(mode=modes.EVAL, loss="vector"),
        "loss not a tensor": spec(mode=modes.EVAL, loss="not a tensor"),
        "train_op not an op": spec(mode=modes.TRAIN, loss="loss", train_op="not a tensor"),
        "eval ok": spec(mode=modes.EVAL, loss="loss"),
        "predict ok": spec(mode=modes.PREDICT, predictions="predictions"),
        "no model_fn": lambda: tf.estimator.Estimator(None),
        "model_fn without features": lambda: tf.estimator.Estimator(lambda inputs, labels: None),
        "params the model_fn lacks": lambda: tf.estimator.Estimator(features_only, params={"a": 1}),
        "model_fn with another argument": lambda: tf.estimator.Estimator(lambda features, extra: None),
        "config not a RunConfig": lambda: tf.estimator.Estimator(linear_model_fn, config={"model_dir": "x"}),
        "model_dir conflict": lambda: tf.estimator.Estimator(
            linear_model_fn, model_dir="/tmp/a", config=tf.estimator.RunConfig(model_dir="/tmp/b")),
        "steps and max_steps": lambda: estimator.train(train_input_fn, steps=1, max_steps=1),
        "steps 0": lambda: estimator.train(train_input_fn, steps=0),
        "max_steps -1": lambda: estimator.train(train_input_fn, max_steps=-1),
        "hook not a hook": lambda: estimator.train(train_input_fn, steps=1, hooks=["hook"]),
        "eval steps 0": lambda: estimator.evaluate(eval_input_fn, steps=0),
        "variable before training": lambda: estimator.get_variable_value("w"),
        "labels to a model_fn without labels": lambda: tf.estimator.Estimator(
            lambda features, mode: None, model_dir=model_dir).train(train_input_fn, steps=1),
        "model_fn returning no spec": lambda: tf.estimator.Estimator(
            lambda features, labels: {"loss": 1}, model_dir=model_dir).train(train_input_fn, steps=1),
        "input_fn returning three": lambda: estimator.train(lambda: (1, 2, 3), steps=1),
        "predict_keys unknown": lambda: list(estimator.predict(predict_input_fn, predict_keys=["z"])),
    }
    results = {name: attempt(action) for name, action in cases.items()}
    results["ModeKeys"] = [modes.TRAIN, modes.EVAL, modes.PREDICT]
    return results
''',
    "train_and_evaluate_locally": '''
def run(model_dir):
    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=4)
    estimator = tf.estimator.Estimator(linear_model_fn, config=config, params={"learning_rate": 0.05})
    train_spec = tf.estimator.TrainSpec(train_input_fn, max_steps=10)
    eval_spec = tf.estimator.EvalSpec(eval_input_fn, steps=None, throttle_secs=0)
    metrics, exports = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    errors = {}
    for name, make in {"max_steps 0": lambda: tf.estimator.TrainSpec(train_input_fn, max_steps=0),
                       "input_fn not callable": lambda: tf.estimator.TrainSpec("data"),
                       "eval steps 0": lambda: tf.estimator.EvalSpec(eval_input_fn, steps=0),
                       "throttle -1": lambda: tf.estimator.EvalSpec(eval_input_fn, throttle_secs=-1),
                       "estimator not one": lambda: tf.estimator.train_and_evaluate(None, train_spec, eval_spec)}.items():
        try:
            make()
            errors[name] = "no error"
        except Exception as error:
            errors[name] = type(error).__name__
    return rounded({"metrics": metrics, "exports": exports or [], "files": files_of(model_dir), "errors": errors,
                    "eval_spec_defaults": [tf.estimator.EvalSpec(eval_input_fn)[index] for index in (1, 5, 6)]})
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return run_text(tf, program_text(name), f"<estimator program {name}>", model_dir)


def run_text(tf: Any, text: str, label: str, model_dir: str) -> Any:
    """Runs the ``run(model_dir)`` that ``text`` defines, with ``tf`` as its TensorFlow module; the result,
    or the error's class and message (the canned estimators' programs run through it too)."""
    scope: dict[str, Any] = {"tf": tf}
    exec(compile(text, label, "exec"), scope)
    try:
        return scope["run"](model_dir)
    except Exception as error:  # noqa: BLE001 - the error's class is part of what the two libraries must share
        return {"error": type(error).__name__, "message": str(error)}
