"""Programs written for TensorFlow 1.x's Estimator that export the TRAIN and EVAL graphs (``export_saved_model``
with ``experimental_mode``, ``experimental_export_all_saved_models``, the supervised input receivers), run
twice as ``export_programs``' are: on tensorgrid in the test process and on TensorFlow 2.15.1's Estimators
in .venv-estimator-oracle. Each loads its export back with ``tf.saved_model.loader.load`` under the
tags TensorFlow gives each mode ('train', 'eval', 'serve') and returns what a user would look at: the
signatures (keys, methods, inputs, outputs), the loss and metrics they compute for the same data, a
training step run from the loaded TRAIN graph's ``saved_model_train_op``, and the error classes of
bad arguments.
"""

from __future__ import annotations

from typing import Any

import estimator_programs
import export_programs

COMMON = '''
def describe(meta):
    return {key: {"method": signature.method_name, "inputs": sorted(signature.inputs),
                  "outputs": sorted(signature.outputs)} for key, signature in meta.signature_def.items()}


def run_supervised(path, tags, key, feeds, train_steps=0):
    """Loads the export of ``tags`` at ``path``; its signatures, and the outputs of signature ``key`` for
    ``feeds`` (input key -> value): the metrics' update ops run once first, then every output but the
    update ops is fetched; with ``train_steps``, the saved train op runs that many times, then the loss."""
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        meta = tf.saved_model.loader.load(session, tags, path)
        signature = meta.signature_def[key]
        feed = {graph.get_tensor_by_name(info.name): feeds[name] for name, info in signature.inputs.items()}
        outputs = {name: graph.get_tensor_by_name(info.name) for name, info in signature.outputs.items()}
        updates = [tensor for name, tensor in outputs.items() if name.endswith("/update_op")]
        if updates:
            session.run(updates, feed)
        values = plain(session.run({name: tensor for name, tensor in outputs.items()
                                    if not name.endswith("/update_op")}, feed))
        result = {"signatures": describe(meta), "tags": sorted(tags), "outputs": values}
        if train_steps:
            train_op = tf.get_collection("saved_model_train_op")[0]
            for _ in range(train_steps):
                session.run(train_op, feed)
            result["loss_after_training"] = plain(session.run(outputs["loss"], feed))
        return result


def supervised_receiver_fn():
    return tf.estimator.experimental.build_raw_supervised_input_receiver_fn(
        {"x": tf.placeholder(tf.float32, [None, 2])}, tf.placeholder(tf.float32, [None, 1]))


def from_input_fn(input_fn):
    """TensorFlow keeps build_supervised_input_receiver_fn_from_input_fn out of its public API (in its export
    module); tensorgrid has it in tf.estimator.export."""
    if tf.__name__.startswith("tensorgrid"):
        return tf.estimator.export.build_supervised_input_receiver_fn_from_input_fn(input_fn)
    from tensorflow_estimator.python.estimator.export import export as estimator_export
    return estimator_export.build_supervised_input_receiver_fn_from_input_fn(input_fn)


def classifier_supervised_receiver_fn():
    return from_input_fn(classifier_input)
'''

PROGRAMS: dict[str, str] = {
    "custom_model_train_and_eval_exports": '''
def run(model_dir):
    estimator = tf.estimator.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.1})
    estimator.train(train_input_fn, steps=5)
    export_base = os.path.join(model_dir, "export")
    train_path = estimator.export_saved_model(export_base, supervised_receiver_fn(),
                                              experimental_mode=tf.estimator.ModeKeys.TRAIN)
    eval_path = estimator.export_saved_model(
        export_base, from_input_fn(eval_input_fn),
        experimental_mode=tf.estimator.ModeKeys.EVAL)
    feeds = {"x": FEATURES, "label": LABELS}
    return {"bytes": isinstance(train_path, bytes), "timestamped": exported_timestamp(train_path),
            "train": run_supervised(train_path, ["train"], "train", feeds, train_steps=2),
            "eval": run_supervised(eval_path, ["eval"], "eval", feeds),
            "evaluate": plain({key: value for key, value in estimator.evaluate(eval_input_fn).items()
                               if key in ("mae", "rmse", "loss")})}
''',
    "canned_classifier_all_modes_export": '''
def run(model_dir):
    estimator = classifier(model_dir)
    estimator.train(classifier_input, steps=6)
    spec = tf.feature_column.make_parse_example_spec(columns())
    path = estimator.experimental_export_all_saved_models(os.path.join(model_dir, "export"), {
        tf.estimator.ModeKeys.TRAIN: classifier_supervised_receiver_fn(),
        tf.estimator.ModeKeys.EVAL: classifier_supervised_receiver_fn(),
        tf.estimator.ModeKeys.PREDICT: tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)})
    feeds = {"x": X, "color": COLOR, "label": CLICKED}
    described, served = run_export(path, {"examples": serialized_examples()}, ["predict"])
    return {"train": run_supervised(path, ["train"], "train", feeds, train_steps=1),
            "eval": run_supervised(path, ["eval"], "eval", feeds),
            "serve": {"signatures": described, "outputs": served}}
''',
    "supervised_export_errors": '''
def run(model_dir):
    estimator = tf.estimator.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.1})
    estimator.train(train_input_fn, steps=1)
    export_base = os.path.join(model_dir, "export")
    train_path = estimator.export_saved_model(export_base, supervised_receiver_fn(),
                                              experimental_mode=tf.estimator.ModeKeys.TRAIN)

    def load(tags):
        with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
            tf.saved_model.loader.load(session, tags, train_path)

    x = tf.placeholder(tf.float32, [None, 2])
    return {
        "serve tag of a train export": attempt(lambda: load(["serve"])),
        "no modes": attempt(lambda: estimator.experimental_export_all_saved_models(export_base, {})),
        "unknown mode": attempt(lambda: estimator.export_saved_model(export_base, supervised_receiver_fn(),
                                                                     experimental_mode="bogus")),
        "overlapping keys": attempt(lambda: tf.estimator.experimental.build_raw_supervised_input_receiver_fn(
            {"x": x}, {"x": x})),
    }
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return estimator_programs.COMMON + export_programs.COMMON + COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<supervised export program {name}>", model_dir)
