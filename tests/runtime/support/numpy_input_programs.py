"""Programs that read numpy arrays through ``tf.estimator.inputs.numpy_input_fn``, written as TF1
programs write them, for tests/runtime/estimator/test_numpy_input_fn_oracle.py to run on tensorgrid
and on TensorFlow 2.15.1's Estimators (``estimator_oracle.py numpy_input_programs ...``). Each is the
text of ``run(model_dir)`` returning what a user would look at: the batches (in order when not
shuffled, as a multiset when shuffled), their static shapes and dtypes, the error classes of bad
arguments, and an Estimator's loss after training on the arrays.
"""

from __future__ import annotations

from typing import Any

import estimator_programs

COMMON = '''
X = np.arange(20, dtype=np.float32).reshape(10, 2)
IDS = np.arange(10, dtype=np.int64) * 3
Y = (np.arange(10) % 2).astype(np.int32)


def flatten(batch):
    """The tensors of a batch: (features, labels), each a dict (by sorted key) or one tensor."""
    if isinstance(batch, tuple):
        return [tensor for part in batch for tensor in flatten(part)]
    if isinstance(batch, dict):
        return [batch[key] for key in sorted(batch)]
    return [batch]


def read_all(input_fn, at_most=50):
    """The batches input_fn gives until its end (or ``at_most``), and their static shapes."""
    with tf.Graph().as_default():
        batch = input_fn()
        flat = flatten(batch)
        static = [t.shape.as_list() for t in flat]
        dtypes = [t.dtype.name for t in flat]
        values = []
        with tf.train.MonitoredSession() as session:
            while not session.should_stop() and len(values) < at_most:
                values.append([v.tolist() for v in session.run(flat)])
    return {"kind": type(batch).__name__, "static": static, "dtypes": dtypes, "batches": values}


def error_of(action):
    try:
        action()
        return None
    except Exception as error:
        return type(error).__name__
'''

PROGRAMS: dict[str, str] = {
    "dict_x_in_order_one_epoch": '''
def run(model_dir):
    return read_all(tf.estimator.inputs.numpy_input_fn({"x": X, "ids": IDS}, Y, batch_size=4, num_epochs=1,
                                                       shuffle=False))
''',
    "array_x_for_ever_full_batches": '''
def run(model_dir):
    return read_all(tf.estimator.inputs.numpy_input_fn(X, Y, batch_size=3, num_epochs=None, shuffle=False),
                    at_most=5)
''',
    "two_epochs_without_labels": '''
def run(model_dir):
    return read_all(tf.estimator.inputs.numpy_input_fn({"x": X}, batch_size=6, num_epochs=2, shuffle=False))
''',
    "labels_as_a_dict": '''
def run(model_dir):
    found = read_all(tf.estimator.inputs.numpy_input_fn({"x": X}, {"y": Y, "z": IDS}, batch_size=5, num_epochs=1,
                                                        shuffle=False))
    return found
''',
    "shuffled_epoch_has_every_row_once": '''
def run(model_dir):
    found = read_all(tf.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=4, num_epochs=1, shuffle=True))
    rows = sorted(row + [label] for batch in found["batches"] for row, label in zip(batch[0], batch[1]))
    return {"static": found["static"], "sizes": [len(batch[1]) for batch in found["batches"]], "rows": rows}
''',
    "bad_arguments": '''
def run(model_dir):
    fn = tf.estimator.inputs.numpy_input_fn
    return {
        "shuffle not given": error_of(lambda: fn({"x": X}, Y)),
        "shuffle not a bool": error_of(lambda: fn({"x": X}, Y, shuffle=1)),
        "x a list": error_of(lambda: fn([1.0, 2.0], shuffle=False)()),
        "x an empty dict": error_of(lambda: fn({}, shuffle=False)()),
        "lengths differ": error_of(lambda: fn({"x": X}, Y[:3], shuffle=False)()),
        "a key in x and y": error_of(lambda: fn({"x": X}, {"x": Y}, shuffle=False)()),
        "y an empty dict": error_of(lambda: fn({"x": X}, {}, shuffle=False)()),
    }
''',
    "estimator_trains_on_arrays": '''
def model_fn(features, labels, mode):
    weights = tf.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
    logits = tf.squeeze(tf.matmul(features["x"] / 20.0, weights), 1)
    loss = tf.losses.sigmoid_cross_entropy(tf.cast(labels, tf.float32), logits)
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def run(model_dir):
    estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir)
    estimator.train(tf.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=4, num_epochs=None, shuffle=False),
                    steps=6)
    metrics = estimator.evaluate(tf.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=4, num_epochs=1,
                                                                    shuffle=False))
    return {"loss": round(float(metrics["loss"]), 5), "global_step": int(metrics["global_step"])}
''',
}


def run_program(tf: Any, name: str, model_dir: str) -> Any:
    """Runs a program with ``tf`` as its TensorFlow module; the result, or the error's class and message."""
    return estimator_programs.run_text(tf, estimator_programs.COMMON + COMMON + PROGRAMS[name],
                                       f"<numpy_input_fn program {name}>", model_dir)
