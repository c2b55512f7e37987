"""Programs written for TensorFlow 1.x's Estimator export and warm start that the tests run twice: on
tensorgrid in the test process and on TensorFlow 2.15.1's Estimators in .venv-estimator-oracle
(``estimator_oracle.py export_programs ...``). Each is the text of ``run(model_dir)`` returning what a
user would look at: the signatures of an exported model, what its loaded copy predicts for
serialized ``tf.train.Example``s or raw features next to the Estimator's own ``predict``, the
exporters' directories, warm-started variables, and the error classes of bad arguments. The
exported files themselves differ (tensorgrid's format is its own), so no program lists them.
"""

from __future__ import annotations

from typing import Any

import estimator_programs

COMMON = '''
import re

X = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 0.5], [0.5, 3.0], [1.5, 1.0], [2.5, 2.0]], np.float32)
COLOR = np.array([["red"], ["green"], ["blue"], ["red"], ["green"], ["blue"]])
CLICKED = (X[:, :1] > X[:, 1:]).astype(np.int64)


def plain(value):
    """Arrays of bytes as lists of str, numbers rounded: comparable across the two libraries."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in sorted(value.items())}
    array = np.asarray(value)
    if array.dtype.kind in "SO":
        return np.vectorize(lambda item: item.decode() if isinstance(item, bytes) else str(item),
                            otypes=[object])(array).tolist()
    return rounded(array)


def serialized_examples():
    examples = []
    for x, color in zip(X, COLOR):
        feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in x])),
                   "color": tf.train.Feature(bytes_list=tf.train.BytesList(value=[color[0].encode()]))}
        examples.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return examples


def run_export(path, feeds, keys):
    """Loads the export at ``path`` in a new graph; its signatures described, and the outputs of those of
    ``keys`` for ``feeds`` (input key -> value; a signature of one input gets the only value given)."""
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        meta = tf.saved_model.loader.load(session, [tf.saved_model.tag_constants.SERVING], path)
        described = {key: {"method": signature.method_name, "inputs": sorted(signature.inputs),
                           "outputs": sorted(signature.outputs)} for key, signature in meta.signature_def.items()}
        outputs = {}
        for key in keys:
            signature = meta.signature_def[key]
            feed = {}
            for name, info in signature.inputs.items():
                value = feeds[name] if name in feeds else next(iter(feeds.values()))
                feed[graph.get_tensor_by_name(info.name)] = value
            fetches = {name: graph.get_tensor_by_name(info.name) for name, info in signature.outputs.items()}
            outputs[key] = plain(session.run(fetches, feed))
    return described, outputs


def columns():
    return [tf.feature_column.numeric_column("x", shape=(2,)),
            tf.feature_column.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])]


def classifier(model_dir, **kwargs):
    return tf.estimator.LinearClassifier(columns(), model_dir=model_dir, optimizer=tf.train.FtrlOptimizer(0.3),
                                         **kwargs)


def classifier_input():
    return tf.data.Dataset.from_tensor_slices(({"x": X, "color": COLOR}, CLICKED)).repeat().batch(3)


def exported_timestamp(path):
    return bool(re.fullmatch(rb"[0-9]+", os.path.basename(path)))


def attempt(action):
    try:
        action()
        return None
    except Exception as error:
        return type(error).__name__
'''

PROGRAMS: dict[str, str] = {
    "custom_model_parsing_export": '''
def run(model_dir):
    estimator = tf.estimator.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.1})
    estimator.train(train_input_fn, steps=5)
    predicted = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(6)))
    spec = {"x": tf.FixedLenFeature([2], tf.float32)}
    path = estimator.export_saved_model(os.path.join(model_dir, "export"),
                                        tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    described, outputs = run_export(path, {"examples": serialized_examples()}, ["serving_default"])
    return {"bytes": isinstance(path, bytes), "timestamped": exported_timestamp(path), "signatures": described,
            "outputs": outputs, "predict": plain({key: [p[key] for p in predicted] for key in predicted[0]})}
''',
    "custom_model_raw_export": '''
def run(model_dir):
    estimator = tf.estimator.Estimator(dnn_model_fn, model_dir=model_dir)
    estimator.train(train_input_fn, steps=4)
    predicted = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(6)))
    receiver_fn = tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tf.placeholder(tf.float32, [7, 2], name="x")})
    path = estimator.export_saved_model(os.path.join(model_dir, "export"), receiver_fn)
    described, outputs = run_export(path, {"x": X}, ["serving_default"])
    return {"signatures": described, "outputs": outputs, "predict": {"output": plain(predicted)}}
''',
    "canned_classifier_export": '''
def run(model_dir):
    estimator = classifier(model_dir)
    estimator.train(classifier_input, steps=6)
    predicted = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X, "color": COLOR}).batch(6)))
    spec = tf.feature_column.make_parse_example_spec(columns())
    path = estimator.export_saved_model(os.path.join(model_dir, "export"),
                                        tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    described, outputs = run_export(path, {"examples": serialized_examples()},
                                    ["serving_default", "classification", "regression", "predict"])
    return {"signatures": described, "outputs": outputs,
            "probabilities": plain([p["probabilities"] for p in predicted]),
            "logistic": plain([p["logistic"] for p in predicted])}
''',
    "exporters_in_train_and_evaluate": '''
def run(model_dir):
    config = tf.estimator.RunConfig(save_checkpoints_steps=3)
    estimator = classifier(model_dir, config=config)
    spec = tf.feature_column.make_parse_example_spec(columns())
    receiver_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)
    exporters = [tf.estimator.LatestExporter("latest", receiver_fn, exports_to_keep=1),
                 tf.estimator.FinalExporter("final", receiver_fn)]
    eval_input = lambda: tf.data.Dataset.from_tensor_slices(({"x": X, "color": COLOR}, CLICKED)).batch(6)
    metrics, exports = tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(classifier_input, max_steps=6),
        tf.estimator.EvalSpec(eval_input, steps=None, exporters=exporters, start_delay_secs=0, throttle_secs=0))
    kept = {name: len(os.listdir(os.path.join(model_dir, "export", name))) for name in ("latest", "final")}
    return {"global_step": int(metrics["global_step"]), "exports": [export is not None for export in exports],
            "timestamped": [exported_timestamp(export) for export in exports], "kept": kept}
''',
    "export_errors": '''
def run(model_dir):
    receiver_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn({"x": tf.FixedLenFeature([2], tf.float32)})
    untrained = tf.estimator.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.1})
    trained = classifier(os.path.join(model_dir, "trained"))
    trained.train(classifier_input, steps=1)
    path = trained.export_saved_model(os.path.join(model_dir, "export"), tf.estimator.export.build_parsing_serving_input_receiver_fn(
        tf.feature_column.make_parse_example_spec(columns())))

    def load_with_training_tag():
        with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
            tf.saved_model.loader.load(session, [tf.saved_model.tag_constants.TRAINING], path)

    x = tf.placeholder(tf.float32, [None, 2])
    return {
        "no checkpoint": attempt(lambda: untrained.export_saved_model(os.path.join(model_dir, "e"), receiver_fn)),
        "no receiver fn": attempt(lambda: untrained.export_saved_model(os.path.join(model_dir, "e"), None)),
        "receiver int key": attempt(lambda: tf.estimator.export.ServingInputReceiver({"x": x}, {1: x})),
        "receiver not a tensor": attempt(lambda: tf.estimator.export.ServingInputReceiver({"x": 3}, {"x": x})),
        "exporters not exporters": attempt(lambda: tf.estimator.EvalSpec(classifier_input, exporters=[3])),
        "exporters same names": attempt(lambda: tf.estimator.EvalSpec(classifier_input, exporters=[
            tf.estimator.LatestExporter("a", receiver_fn), tf.estimator.FinalExporter("a", receiver_fn)])),
        "keep zero": attempt(lambda: tf.estimator.LatestExporter("a", receiver_fn, exports_to_keep=0)),
        "wrong tags": attempt(load_with_training_tag),
        "classification of floats": attempt(lambda: tf.estimator.export.ClassificationOutput(classes=x)),
        "regression of strings": attempt(
            lambda: tf.estimator.export.RegressionOutput(tf.placeholder(tf.string, [None]))),
    }
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return estimator_programs.COMMON + COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<export program {name}>", model_dir)
