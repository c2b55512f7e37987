"""Programs written for TensorFlow 1.x's Estimator whose exported signatures take sparse input, run twice as
``export_programs``' are: on tensorgrid in the test process and on TensorFlow 2.15.1's Estimators in
.venv-estimator-oracle. One model reads a ``SparseFeature`` (weights by position) and a ``VarLenFeature``
(words, hashed): exported with ``build_parsing_serving_input_receiver_fn`` (serialized tf.Examples in), and
with a ``ServingInputReceiver`` whose receiver tensors are SparseTensors (``tf.sparse_placeholder``), fed
through ``tf.saved_model.utils.get_tensor_from_tensor_info``. Each returns the signatures (which inputs
are sparse) and what the loaded export predicts next to the Estimator's own ``predict``.
"""

from __future__ import annotations

from typing import Any

import estimator_programs
import export_programs

COMMON = '''
POSITIONS = [[0, 2], [1], [3, 0, 1], [2]]
WEIGHTS = [[1.0, 0.5], [2.0], [0.25, 1.5, 1.0], [3.0]]
WORDS = [[b"ad", b"shoe"], [b"car"], [b"shoe"], [b"ad", b"car", b"hat"]]
TARGETS = np.array([[1.0], [0.5], [2.0], [1.5]], np.float32)


def sparse_spec():
    return {"weighted": tf.io.SparseFeature("position", "weight", tf.float32, 4),
            "words": tf.io.VarLenFeature(tf.string)}


def sparse_examples():
    examples = []
    for positions, weights, words in zip(POSITIONS, WEIGHTS, WORDS):
        feature = {"position": tf.train.Feature(int64_list=tf.train.Int64List(value=positions)),
                   "weight": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
                   "words": tf.train.Feature(bytes_list=tf.train.BytesList(value=words))}
        examples.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return examples


def sparse_model_fn(features, labels, mode):
    weighted, words = features["weighted"], features["words"]
    position_weights = tf.get_variable("position_weights", [4, 1],
                                       initializer=tf.constant_initializer([[0.5], [-0.25], [1.0], [0.75]]))
    word_weights = tf.get_variable("word_weights", [5, 1], initializer=tf.constant_initializer(0.1))
    bias = tf.get_variable("bias", [1], initializer=tf.zeros_initializer())
    positions = tf.SparseTensor(weighted.indices, weighted.indices[:, 1], weighted.dense_shape)
    word_ids = tf.SparseTensor(words.indices, tf.string_to_hash_bucket_fast(words.values, 5), words.dense_shape)
    logits = (tf.nn.embedding_lookup_sparse(position_weights, positions, weighted, combiner="sum")
              + tf.nn.embedding_lookup_sparse(word_weights, word_ids, None, combiner="mean") + bias)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.2).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def sparse_input_fn():
    return tf.io.parse_example(tf.constant(sparse_examples()), sparse_spec()), tf.constant(TARGETS)


def sparse_predict_input_fn():
    return tf.data.Dataset.from_tensor_slices(sparse_examples()).batch(4).map(
        lambda serialized: tf.io.parse_example(serialized, sparse_spec()))


def trained_sparse_model(model_dir):
    estimator = tf.estimator.Estimator(sparse_model_fn, model_dir=model_dir)
    estimator.train(sparse_input_fn, steps=4)
    predicted = list(estimator.predict(sparse_predict_input_fn))
    return estimator, plain({"logits": [p["logits"] for p in predicted]})


def sparse_value(rows, values):
    indices = [[row, column] for row, items in enumerate(rows) for column in range(len(items))]
    return tf.SparseTensorValue(indices, [value for items in values for value in items],
                                [len(rows), max(len(items) for items in rows)])


def predict_with_export(path, feeds):
    """The loaded export's serving_default signature: which inputs are sparse, and its outputs for ``feeds``
    (input key -> value, a SparseTensorValue for a sparse input)."""
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        meta = tf.saved_model.loader.load(session, [tf.saved_model.tag_constants.SERVING], path)
        signature = meta.signature_def["serving_default"]
        feed = {tf.saved_model.utils.get_tensor_from_tensor_info(info, graph): feeds[name]
                for name, info in signature.inputs.items()}
        fetches = {name: tf.saved_model.utils.get_tensor_from_tensor_info(info, graph)
                   for name, info in signature.outputs.items()}
        return {"inputs": sorted(signature.inputs), "sparse_inputs": sorted(
                    name for name, info in signature.inputs.items() if not info.name),
                "outputs": plain(session.run(fetches, feed))}
'''

PROGRAMS: dict[str, str] = {
    "parsing_receiver_with_sparse_features": '''
def run(model_dir):
    estimator, predicted = trained_sparse_model(model_dir)
    path = estimator.export_saved_model(os.path.join(model_dir, "export"),
                                        tf.estimator.export.build_parsing_serving_input_receiver_fn(sparse_spec()))
    return {"export": predict_with_export(path, {"examples": sparse_examples()}), "predict": predicted}
''',
    "sparse_receiver_tensors": '''
def run(model_dir):
    estimator, predicted = trained_sparse_model(model_dir)

    def receiver_fn():
        weighted = tf.sparse_placeholder(tf.float32, [None, 4], name="weighted")
        words = tf.sparse_placeholder(tf.string, [None, None], name="words")
        features = {"weighted": weighted, "words": words}
        return tf.estimator.export.ServingInputReceiver(features, dict(features))

    path = estimator.export_saved_model(os.path.join(model_dir, "export"), receiver_fn)
    weighted = tf.SparseTensorValue([[row, position] for row, items in enumerate(POSITIONS) for position in items],
                                    [value for items in WEIGHTS for value in items], [len(POSITIONS), 4])
    order = np.lexsort(np.array(weighted.indices).T[::-1])
    weighted = tf.SparseTensorValue(np.array(weighted.indices)[order], np.array(weighted.values, np.float32)[order],
                                    weighted.dense_shape)
    return {"export": predict_with_export(path, {"weighted": weighted, "words": sparse_value(WORDS, WORDS)}),
            "predict": predicted}
''',
}


def program_text(name: str) -> str:
    """The text that defines ``run(model_dir)`` for the program ``name``, with its shared helpers."""
    return estimator_programs.COMMON + export_programs.COMMON + COMMON + PROGRAMS[name]


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, program_text(name), f"<sparse export program {name}>", model_dir)
