"""Programs written for TensorFlow 1.x's canned estimators that the canned-estimator tests run twice:
on tensorgrid in the test process and on TensorFlow 2.15.1's Estimators in .venv-estimator-oracle
(``estimator_oracle.py canned_estimator_programs ...``). Each is the text of ``run(model_dir)``
returning what a user would look at, as JSON-able values; the same text runs on both.

The linear estimators start from zeros, so their runs are compared number for number. The DNN and
wide-and-deep ones start from random (Glorot uniform, truncated normal) values that two libraries
cannot draw alike, so the ``fixed_start`` programs set every trainable variable to the same
values first (``FixedStart``, a hook that assigns values drawn from each variable's rank in name
order) and are then compared number for number too; ``dnn_random_start`` keeps TF's random start
and compares what does not depend on it: names, shapes, keys and dtypes, and that training learns.
"""

from __future__ import annotations

from typing import Any

import estimator_programs

COMMON = '''
import re

import numpy as np

X = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 0.5], [0.5, 3.0], [1.5, 1.0], [2.5, 2.0], [0.2, 0.1], [3.0, 2.5]],
             np.float32)
COLOR = np.array([["red"], ["green"], ["blue"], ["red"], ["green"], ["blue"], ["red"], ["green"]])
CITY = np.array([["paris"], ["oslo"], ["rome"], ["lima"], ["oslo"], ["paris"], ["kyiv"], ["rome"]])
WEIGHT = np.array([[1.0], [2.0], [1.0], [0.5], [1.0], [1.5], [1.0], [2.0]], np.float32)
CLICKED = (X[:, :1] > X[:, 1:]).astype(np.int64)
LEVEL = np.array([["low"], ["mid"], ["high"], ["low"], ["mid"], ["high"], ["low"], ["high"]])
VALUE = (X @ np.array([[0.7], [-0.3]], np.float32) + 0.2).astype(np.float32)
FEATURES = {"x": X, "color": COLOR, "city": CITY, "w": WEIGHT}


def train_input(labels):
    return lambda: tf.data.Dataset.from_tensor_slices((FEATURES, labels)).repeat().batch(4)


def eval_input(labels):
    return lambda: tf.data.Dataset.from_tensor_slices((FEATURES, labels)).batch(4)


def predict_input():
    return tf.data.Dataset.from_tensor_slices(FEATURES).batch(4)


def columns():
    fc = tf.feature_column
    x = fc.numeric_column("x", shape=(2,))
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    city = fc.categorical_column_with_hash_bucket("city", 7)
    wide = [x, color, city, fc.crossed_column([color, "city"], 5)]
    deep = [x, fc.indicator_column(color), fc.embedding_column(city, 3)]
    return wide, deep


class LossRecorder(tf.train.SessionRunHook):
    def __init__(self):
        self.losses = []

    def before_run(self, run_context):
        # The heads' training loss: the first scalar (the softmax and squared-error heads put their
        # per-example losses in the collection first, as tf.losses does).
        losses = [loss for loss in tf.get_collection(tf.GraphKeys.LOSSES) if loss.shape.ndims == 0]
        return tf.train.SessionRunArgs(losses[0])

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def checkpoint_name(variable):
    return re.sub(r"/part_[0-9]+$", "", variable.op.name)


class FixedStart(tf.train.SessionRunHook):
    """Every trainable variable set to values drawn from its rank in name order, on both libraries."""

    def begin(self):
        variables = sorted(tf.trainable_variables(), key=checkpoint_name)
        self.names = [checkpoint_name(variable) for variable in variables]
        self._assigns = [tf.assign(variable, np.random.RandomState(index).uniform(
            -0.5, 0.5, variable.shape.as_list()).astype(np.float32)) for index, variable in enumerate(variables)]

    def after_create_session(self, session, coord):
        session.run(self._assigns)


def rounded(value):
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [rounded(item) for item in value]
    if isinstance(value, (bytes, str)):
        return value if isinstance(value, str) else value.decode()
    array = np.asarray(value)
    if array.dtype.kind in "SO":
        return [item.decode() if isinstance(item, bytes) else item for item in array.ravel().tolist()]
    return array.astype(float).round(4).tolist() if array.dtype.kind == "f" else array.tolist()


def described(predictions):
    """Each prediction key's dtype kind and shape (per example)."""
    return {key: [np.asarray(value).dtype.kind, list(np.shape(value))] for key, value in sorted(predictions.items())}


def trained(estimator, labels, steps=6, hooks=()):
    """Training losses, metrics, predictions and checkpoint variables of ``estimator``."""
    recorder = LossRecorder()
    estimator.train(train_input(labels), steps=steps, hooks=[recorder, *hooks])
    metrics = estimator.evaluate(eval_input(labels))
    predictions = list(estimator.predict(predict_input))
    return {"losses": recorder.losses, "metrics": metrics, "predictions": predictions,
            "described": described(predictions[0]), **variables_of(estimator)}


def variables_of(estimator):
    """The model's variables in the checkpoint (shapes and values) and, for each, its optimizer slots'
    last names: TensorFlow names a slot of a partitioned variable <variable>/part_<i>/<slot> (or
    <variable>/t_0/<slot> in a DNN), one entry per part, where tensorgrid keeps one sliced entry
    <variable>/<slot> (docs/differences.md); the checkpoint keys of the variables are the same."""
    names = estimator.get_variable_names()
    model = [name for name in names if not any(name.startswith(other + "/") for other in names)]
    slots = {name: sorted({other.rsplit("/", 1)[1] for other in names if other.startswith(name + "/")})
             for name in model}
    return {"variables": {name: list(estimator.get_variable_value(name).shape) for name in model},
            "slots": slots, "values": {name: estimator.get_variable_value(name) for name in model if "/" in name}}
'''

PROGRAMS: dict[str, str] = {
    "linear_classifier_binary": '''
def run(model_dir):
    wide, _ = columns()
    estimator = tf.estimator.LinearClassifier(wide, model_dir=model_dir, weight_column="w")
    return rounded(trained(estimator, CLICKED))
''',
    "linear_classifier_multi_class_vocabulary": '''
def run(model_dir):
    wide, _ = columns()
    estimator = tf.estimator.LinearClassifier(wide[:2], model_dir=model_dir, n_classes=3,
                                              label_vocabulary=["low", "mid", "high"], optimizer="SGD")
    return rounded(trained(estimator, LEVEL))
''',
    "linear_regressor_partitioned_and_optimizers": '''
def run(model_dir):
    wide, _ = columns()
    default = tf.estimator.LinearRegressor(wide, model_dir=model_dir + "/default")
    partitioned = tf.estimator.LinearRegressor(
        wide[:2], model_dir=model_dir + "/partitioned", optimizer=lambda: tf.train.AdagradOptimizer(0.3),
        partitioner=tf.min_max_variable_partitioner(max_partitions=2, min_slice_size=4),
        loss_reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE)
    adam = tf.estimator.LinearRegressor(wide[:1], model_dir=model_dir + "/adam", optimizer=tf.train.AdamOptimizer(0.1),
                                        weight_column=tf.feature_column.numeric_column("w"))
    return rounded({"default": trained(default, VALUE), "partitioned": trained(partitioned, VALUE),
                    "adam": trained(adam, VALUE)})
''',
    "dnn_classifier_fixed_start": '''
def run(model_dir):
    _, deep = columns()
    start = FixedStart()
    estimator = tf.estimator.DNNClassifier([4, 3], deep, model_dir=model_dir, weight_column="w")
    result = trained(estimator, CLICKED, hooks=[start])
    result["trainable"] = start.names
    return rounded(result)
''',
    "dnn_multi_class_and_regressor_fixed_start": '''
def run(model_dir):
    _, deep = columns()
    multi = tf.estimator.DNNClassifier([3], deep, model_dir=model_dir + "/multi", n_classes=3,
                                       label_vocabulary=["low", "mid", "high"], activation_fn=tf.nn.tanh,
                                       optimizer="Adam")
    regressor = tf.estimator.DNNRegressor([3, 2], deep[:2], model_dir=model_dir + "/regressor", optimizer="RMSProp")
    return rounded({"multi": trained(multi, LEVEL, hooks=[FixedStart()]),
                    "regressor": trained(regressor, VALUE, hooks=[FixedStart()])})
''',
    "dnn_linear_combined_fixed_start": '''
def run(model_dir):
    wide, deep = columns()
    start = FixedStart()
    classifier = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir + "/classifier", linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[4, 2])
    classified = trained(classifier, CLICKED, hooks=[start])
    classified["trainable"] = start.names
    regressor = tf.estimator.DNNLinearCombinedRegressor(
        model_dir=model_dir + "/regressor", linear_feature_columns=wide[:2], dnn_feature_columns=deep[:1],
        dnn_hidden_units=[2], linear_optimizer="SGD", dnn_optimizer=lambda: tf.train.GradientDescentOptimizer(0.1))
    wide_only = tf.estimator.DNNLinearCombinedClassifier(model_dir=model_dir + "/wide", linear_feature_columns=wide)
    return rounded({"classifier": classified, "regressor": trained(regressor, VALUE, hooks=[FixedStart()]),
                    "wide_only": trained(wide_only, CLICKED)})
''',
    "dnn_partitioned_input_layer_fixed_start": '''
def run(model_dir):
    _, deep = columns()
    regressor = tf.estimator.DNNRegressor(
        [2], deep, model_dir=model_dir, weight_column="w",
        input_layer_partitioner=tf.min_max_variable_partitioner(max_partitions=2, min_slice_size=16))
    start = FixedStart()
    result = trained(regressor, VALUE, hooks=[start])
    result["trainable"] = start.names
    return rounded(result)
''',
    "dnn_random_start": '''
def run(model_dir):
    _, deep = columns()
    estimator = tf.estimator.DNNClassifier([8, 4], deep, model_dir=model_dir, dropout=0.1,
                                           optimizer=tf.train.AdagradOptimizer(0.3))
    recorder = LossRecorder()
    # 200 steps: from a random start with dropout, TensorFlow's own run missed an AUC of 0.8 after
    # 60 steps in about one run of two here.
    estimator.train(train_input(CLICKED), steps=200, hooks=[recorder])
    metrics = estimator.evaluate(eval_input(CLICKED))
    predictions = list(estimator.predict(predict_input))
    first, last = np.mean(recorder.losses[:5]), np.mean(recorder.losses[-5:])
    return rounded({"loss_fell": bool(last < first), "accuracy_at_least_0.75": bool(metrics["accuracy"] >= 0.75),
                    "auc_at_least_0.8": bool(metrics["auc"] >= 0.8), "metric_keys": sorted(metrics),
                    "described": described(predictions[0]),
                    "variables": variables_of(estimator)["variables"], "slots": variables_of(estimator)["slots"]})
''',
    "errors": '''
def attempt(action):
    try:
        action()
    except Exception as error:
        return type(error).__name__
    return "no error"


def run(model_dir):
    wide, deep = columns()
    linear = lambda **kwargs: tf.estimator.LinearClassifier(wide, model_dir=model_dir + "/e", **kwargs)
    train = lambda estimator, labels=CLICKED: estimator.train(train_input(labels), steps=1)
    cases = {
        "optimizer name unknown": lambda: train(linear(optimizer="Sgd")),
        "optimizer not an optimizer": lambda: train(linear(optimizer=3)),
        "n_classes 1": lambda: linear(n_classes=1),
        "vocabulary not a list, binary": lambda: linear(label_vocabulary="low"),
        "vocabulary not a list, multi": lambda: linear(n_classes=3, label_vocabulary="low"),
        "loss_reduction none": lambda: linear(loss_reduction=tf.losses.Reduction.NONE),
        "labels out of range": lambda: train(linear(), CLICKED + 1),
        "float labels, multi class": lambda: train(linear(n_classes=3), VALUE),
        "features not a dict": lambda: linear().train(lambda: (tf.constant(X), tf.constant(CLICKED)), steps=1),
        "no labels": lambda: linear().train(lambda: tf.data.Dataset.from_tensor_slices(FEATURES).batch(2), steps=1),
        "labels of 2 columns": lambda: train(linear(), np.concatenate([CLICKED, CLICKED], 1)),
        "combined without columns": lambda: tf.estimator.DNNLinearCombinedClassifier(),
        "combined without hidden units": lambda: train(tf.estimator.DNNLinearCombinedClassifier(
            model_dir=model_dir + "/c", dnn_feature_columns=deep)),
        "dnn column not dense": lambda: train(tf.estimator.DNNClassifier([2], wide, model_dir=model_dir + "/d")),
        "weight column not a column": lambda: train(linear(weight_column=3)),
    }
    return {name: attempt(action) for name, action in cases.items()}
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<canned estimator program {name}>", model_dir)
