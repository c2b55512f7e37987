"""A TF1 Estimator: linear regression with a model_fn, trained, evaluated and used for prediction.

Written for TensorFlow 1.x (only the import line differs). ``train_and_evaluate`` reads TF_CONFIG:
run as it is, it trains and evaluates in this process; under ``tensorgrid local`` each task does
its part. Runs in seconds:

    python examples/estimator_linear.py [--model-dir DIR] [--steps 200]
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

import tensorgrid as tf

TRUE_WEIGHTS = np.array([[2.0], [-1.0], [0.5]], np.float32)
TRUE_BIAS = 0.3


def make_data(examples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(examples, 3)).astype(np.float32)
    labels = features @ TRUE_WEIGHTS + TRUE_BIAS + rng.normal(scale=0.05, size=(examples, 1)).astype(np.float32)
    return features, labels.astype(np.float32)


TRAIN_FEATURES, TRAIN_LABELS = make_data(512, seed=0)
EVAL_FEATURES, EVAL_LABELS = make_data(128, seed=1)


def train_input_fn():  # type: ignore[no-untyped-def]
    return tf.data.Dataset.from_tensor_slices(({"x": TRAIN_FEATURES}, TRAIN_LABELS)).shuffle(512, seed=0).repeat().batch(32)


def eval_input_fn():  # type: ignore[no-untyped-def]
    return tf.data.Dataset.from_tensor_slices(({"x": EVAL_FEATURES}, EVAL_LABELS)).batch(64)


def model_fn(features, labels, mode, params):  # type: ignore[no-untyped-def]
    prediction = tf.layers.dense(features["x"], 1, kernel_initializer=tf.zeros_initializer())
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": prediction})
    loss = tf.losses.mean_squared_error(labels, prediction)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": tf.metrics.mean_absolute_error(labels, prediction)})
    optimizer = tf.train.GradientDescentOptimizer(params["learning_rate"])
    return tf.estimator.EstimatorSpec(mode, loss=loss,
                                      train_op=optimizer.minimize(loss, global_step=tf.train.get_global_step()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="checkpoints and summaries (default: a new temporary one)")
    parser.add_argument("--steps", type=int, default=200, help="the global step to train to")
    args = parser.parse_args()
    config = tf.estimator.RunConfig(model_dir=args.model_dir or tempfile.mkdtemp(), save_checkpoints_steps=100,
                                    log_step_count_steps=100)
    estimator = tf.estimator.Estimator(model_fn, config=config, params={"learning_rate": 0.1})
    metrics, _ = tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(train_input_fn, max_steps=args.steps),
        tf.estimator.EvalSpec(eval_input_fn, steps=None, throttle_secs=0))
    if metrics is None:
        return  # a task of a cluster: the evaluator reports
    print(f"global step {metrics['global_step']}  eval loss {metrics['loss']:.4f}  mae {metrics['mae']:.4f}")
    first = next(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": EVAL_FEATURES[:1]}).batch(1)))
    print(f"prediction {float(first['y'][0]):.3f} for label {float(EVAL_LABELS[0, 0]):.3f}")


if __name__ == "__main__":
    main()
