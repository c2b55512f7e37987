"""Programs for warm-starting with vocabulary remapping (``tf.estimator.VocabInfo`` in
``WarmStartSettings(var_name_to_vocab_info=...)``), run on tensorgrid in the test process and on
TensorFlow 2.15.1's Estimators in .venv-estimator-oracle (``estimator_oracle.py
warm_start_vocab_programs ...``), with the helpers of ``canned_estimator_programs``.

A first canned estimator trains from a fixed start (``FixedStart``), so its checkpoint is the same
on both libraries; a second one, over a changed vocabulary (entries reordered, added, dropped, an
old vocabulary cut short by ``old_vocab_size``), starts from it and does not learn (learning rate 0),
so its variables after one step are what the warm start gave them: compared number for number.
The backup initializers are ``ones_initializer``s: TensorFlow calls them with a shape tensor, which
its ``constant_initializer`` cannot take (tensorgrid's can).
"""

from __future__ import annotations

from typing import Any

import canned_estimator_programs
import estimator_programs

COMMON = '''
import os


def vocabulary_file(model_dir, name, entries):
    path = os.path.join(model_dir, name)
    with open(path, "w") as file:
        file.write("\\n".join(entries) + "\\n")
    return path


OLD_COLORS = ["red", "green", "blue"]
NEW_COLORS = ["blue", "yellow", "red", "black"]


def color_column(path, size):
    return tf.feature_column.categorical_column_with_vocabulary_file("color", path, vocabulary_size=size,
                                                                     num_oov_buckets=1)


def frozen_values(estimator, labels):
    estimator.train(train_input(labels), steps=1)
    return {name: estimator.get_variable_value(name) for name in estimator.get_variable_names() if "/" in name}


def attempt(action):
    try:
        action()
    except Exception as error:
        return type(error).__name__
    return "no error"
'''

PROGRAMS: dict[str, str] = {
    "wide_and_deep_rows_remapped": '''
def run(model_dir):
    old, new = vocabulary_file(model_dir, "old", OLD_COLORS), vocabulary_file(model_dir, "new", NEW_COLORS)
    x = tf.feature_column.numeric_column("x", shape=(2,))

    def estimator(path, size, directory, settings=None, learning_rate=0.1):
        color = color_column(path, size)
        return tf.estimator.DNNLinearCombinedClassifier(
            model_dir=os.path.join(model_dir, directory), linear_feature_columns=[x, color],
            dnn_feature_columns=[x, tf.feature_column.embedding_column(color, 2)], dnn_hidden_units=[3],
            linear_optimizer=tf.train.GradientDescentOptimizer(learning_rate),
            dnn_optimizer=tf.train.GradientDescentOptimizer(learning_rate), warm_start_from=settings)

    first = estimator(old, 3, "first")
    first.train(train_input(CLICKED), steps=3, hooks=[FixedStart()])
    embedding = "dnn/input_from_feature_columns/input_layer/color_embedding/embedding_weights"
    weights = "linear/linear_model/color/weights"
    settings = tf.estimator.WarmStartSettings(os.path.join(model_dir, "first"), var_name_to_vocab_info={
        embedding: tf.estimator.VocabInfo(new, 4, 1, old, backup_initializer=tf.ones_initializer()),
        weights: tf.estimator.VocabInfo(new, 4, 1, old)})
    second = estimator(new, 4, "second", settings, learning_rate=0.0)
    return rounded({"first": {name: first.get_variable_value(name) for name in (embedding, weights)},
                    "second": frozen_values(second, CLICKED)})
''',
    "classes_remapped_along_axis_1": '''
def run(model_dir):
    old_classes, new_classes = ["low", "mid", "high"], ["high", "top", "low"]
    old, new = vocabulary_file(model_dir, "old", old_classes), vocabulary_file(model_dir, "new", new_classes)
    x = tf.feature_column.numeric_column("x", shape=(2,))
    first = tf.estimator.DNNClassifier([3], [x], model_dir=os.path.join(model_dir, "first"), n_classes=3,
                                       label_vocabulary=old_classes)
    first.train(train_input(LEVEL), steps=3, hooks=[FixedStart()])
    settings = tf.estimator.WarmStartSettings(os.path.join(model_dir, "first"), var_name_to_vocab_info={
        "dnn/logits/kernel": tf.estimator.VocabInfo(new, 3, 0, old, backup_initializer=tf.ones_initializer(),
                                                    axis=1)})
    second = tf.estimator.DNNClassifier([3], [x], model_dir=os.path.join(model_dir, "second"), n_classes=3,
                                        label_vocabulary=new_classes, warm_start_from=settings,
                                        optimizer=tf.train.GradientDescentOptimizer(0.0))
    labels = np.where(LEVEL == "mid", "top", LEVEL)
    return rounded({"first": {name: first.get_variable_value(name) for name in ("dnn/logits/kernel", "dnn/logits/bias")},
                    "second": frozen_values(second, labels)})
''',
    "only_vocabulary_variables_cut_short_and_partitioned": '''
def run(model_dir):
    old, new = vocabulary_file(model_dir, "old", OLD_COLORS), vocabulary_file(model_dir, "new", NEW_COLORS)

    def estimator(path, size, directory, settings=None, learning_rate=0.1, partitioner=None):
        return tf.estimator.LinearClassifier([color_column(path, size)], model_dir=os.path.join(model_dir, directory),
                                             optimizer=tf.train.GradientDescentOptimizer(learning_rate),
                                             partitioner=partitioner, warm_start_from=settings)

    first = estimator(old, 3, "first")
    first.train(train_input(CLICKED), steps=4)
    weights = "linear/linear_model/color/weights"
    settings = tf.estimator.WarmStartSettings(os.path.join(model_dir, "first"), vars_to_warm_start=None,
                                              var_name_to_vocab_info={weights: tf.estimator.VocabInfo(
                                                  new, 4, 1, old, old_vocab_size=2,
                                                  backup_initializer=tf.ones_initializer())})
    second = estimator(new, 4, "second", settings, learning_rate=0.0, partitioner=tf.fixed_size_partitioner(2))
    return rounded({"first": {name: first.get_variable_value(name) for name in (weights, "linear/linear_model/bias_weights")},
                    "second": frozen_values(second, CLICKED)})
''',
    "vocabulary_errors": '''
def run(model_dir):
    old, new = vocabulary_file(model_dir, "old", OLD_COLORS), vocabulary_file(model_dir, "new", NEW_COLORS)
    first = tf.estimator.LinearClassifier([color_column(old, 3)], model_dir=os.path.join(model_dir, "first"))
    first.train(train_input(CLICKED), steps=1)
    source = os.path.join(model_dir, "first")

    def second(directory, vocab_info):
        estimator = tf.estimator.LinearClassifier(
            [color_column(new, 4)], model_dir=os.path.join(model_dir, directory),
            warm_start_from=tf.estimator.WarmStartSettings(source, var_name_to_vocab_info=vocab_info))
        estimator.train(train_input(CLICKED), steps=1)

    return {
        "axis 2": attempt(lambda: tf.estimator.VocabInfo(new, 4, 1, old, axis=2)),
        "unused name": attempt(lambda: second("a", {"nowhere": tf.estimator.VocabInfo(new, 4, 1, old)})),
        "missing sizes": attempt(lambda: second("b", {"linear/linear_model/color/weights":
                                                      tf.estimator.VocabInfo(new, 0, 1, old)})),
    }
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return canned_estimator_programs.COMMON + COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<warm start vocabulary program {name}>", model_dir)
