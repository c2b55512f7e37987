"""Programs written for TensorFlow 1.x's Estimator warm start (``warm_start_from``, ``WarmStartSettings``)
that the tests run twice: on tensorgrid in the test process and on TensorFlow 2.15.1's Estimators in
.venv-estimator-oracle (``estimator_oracle.py warm_start_programs ...``). A first Estimator trains;
a second starts from its checkpoint (a directory, a regex, a list of scopes, renamed variables, a
partitioned variable, an export) and reports its variables; bad settings report their error classes.
"""

from __future__ import annotations

from typing import Any

import estimator_programs
import export_programs

COMMON = '''
def named_model_fn(features, labels, mode, params):
    w = tf.get_variable(params["w"], [2, 1], initializer=tf.constant_initializer([[0.1], [0.2]]))
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    prediction = tf.matmul(features["x"], w) + b
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=prediction)
    loss = tf.losses.mean_squared_error(labels, prediction)
    train_op = tf.train.GradientDescentOptimizer(params["learning_rate"]).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def trained_first(model_dir):
    first = tf.estimator.Estimator(linear_model_fn, model_dir=os.path.join(model_dir, "first"),
                                   params={"learning_rate": 0.1})
    first.train(train_input_fn, steps=5)
    return first


def frozen(model_dir, warm_start_from, w="w"):
    """An Estimator that does not learn (learning rate 0), warm-started: its variables after one step are its start."""
    estimator = tf.estimator.Estimator(named_model_fn, model_dir=os.path.join(model_dir, "second"),
                                       params={"learning_rate": 0.0, "w": w}, warm_start_from=warm_start_from)
    estimator.train(train_input_fn, steps=1)
    return {name: rounded(estimator.get_variable_value(name)) for name in estimator.get_variable_names()}


def first_values(first):
    return {name: rounded(first.get_variable_value(name)) for name in ("w", "b", "global_step")}
'''

PROGRAMS: dict[str, str] = {
    "warm_start_from_a_directory": '''
def run(model_dir):
    first = trained_first(model_dir)
    return {"first": first_values(first), "second": frozen(model_dir, os.path.join(model_dir, "first"))}
''',
    "warm_start_settings_regex_and_scopes": '''
def run(model_dir):
    first = trained_first(model_dir)
    source = os.path.join(model_dir, "first")
    only_w = frozen(os.path.join(model_dir, "a"), tf.estimator.WarmStartSettings(source, vars_to_warm_start="w"))
    scopes = frozen(os.path.join(model_dir, "b"), tf.estimator.WarmStartSettings(
        first.latest_checkpoint(), vars_to_warm_start=["b", "global_step"]))
    return {"first": first_values(first), "only_w": only_w, "scopes": scopes}
''',
    "warm_start_renamed_variable": '''
def run(model_dir):
    first = trained_first(model_dir)
    settings = tf.estimator.WarmStartSettings(os.path.join(model_dir, "first"),
                                              var_name_to_prev_var_name={"weights": "w"})
    return {"first": first_values(first), "second": frozen(model_dir, settings, w="weights")}
''',
    "warm_start_canned_partitioned": '''
def run(model_dir):
    first = classifier(os.path.join(model_dir, "first"))
    first.train(classifier_input, steps=4)
    second = tf.estimator.LinearClassifier(columns(), model_dir=os.path.join(model_dir, "second"),
                                           optimizer=tf.train.GradientDescentOptimizer(0.0),
                                           partitioner=tf.fixed_size_partitioner(2),
                                           warm_start_from=os.path.join(model_dir, "first"))
    second.train(classifier_input, steps=1)
    names = [name for name in second.get_variable_names() if name.endswith("weights")]
    return {"first": {name: rounded(first.get_variable_value(name)) for name in names},
            "second": {name: rounded(second.get_variable_value(name)) for name in names}}
''',
    "warm_start_from_an_export": '''
def run(model_dir):
    first = trained_first(model_dir)
    path = first.export_saved_model(os.path.join(model_dir, "export"),
                                    tf.estimator.export.build_raw_serving_input_receiver_fn(
                                        {"x": tf.placeholder(tf.float32, [None, 2])}))
    return {"first": first_values(first), "second": frozen(model_dir, path)}
''',
    "warm_start_errors": '''
def run(model_dir):
    trained_first(model_dir)
    source = os.path.join(model_dir, "first")
    return {
        "renamed without a map": attempt(lambda: frozen(os.path.join(model_dir, "a"), source, w="weights")),
        "unused rename": attempt(lambda: frozen(os.path.join(model_dir, "b"), tf.estimator.WarmStartSettings(
            source, var_name_to_prev_var_name={"nowhere": "w"}))),
        "bad vars type": attempt(lambda: frozen(os.path.join(model_dir, "c"), tf.estimator.WarmStartSettings(
            source, vars_to_warm_start=5))),
        "mixed list": attempt(lambda: frozen(os.path.join(model_dir, "d"), tf.estimator.WarmStartSettings(
            source, vars_to_warm_start=["w", 5]))),
        "bad warm_start_from": attempt(lambda: tf.estimator.Estimator(linear_model_fn, params={"learning_rate": 0.1},
                                                                      warm_start_from=3)),
        "shape differs": attempt(lambda: frozen(os.path.join(model_dir, "e"), tf.estimator.WarmStartSettings(
            source, var_name_to_prev_var_name={"w": "b"}))),
    }
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return estimator_programs.COMMON + export_programs.COMMON + COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<warm start program {name}>", model_dir)
