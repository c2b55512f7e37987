"""A TF1 wide-and-deep Estimator: ``DNNLinearCombinedClassifier`` on a synthetic click log.

Written for TensorFlow 1.x (only the import line differs). The wide part is a linear model (FTRL
at 0.1) over the site (hashed into 100 buckets), the device (a vocabulary) and their cross; the deep
part a 16-8 relu network (Adagrad at 0.05) over the site's 8-wide embedding, the device as one-hot and the
hour of the day in 8 buckets. ``train_and_evaluate`` reads TF_CONFIG: run as it is, it trains and
evaluates in this process; under ``tensorgrid local`` (with PS tasks and an evaluator) each task
does its part, the linear and embedding variables partitioned over the PS tasks. The final
checkpoint's model is exported for serving (parsing ``tf.train.Example``s) to
``<model-dir>/export/wide_deep/<timestamp>``. Runs in seconds:

    python examples/wide_deep_estimator.py [--model-dir DIR] [--steps 300] [--backend tensorflow]

The clicks are drawn from a hidden logistic model of site, device and hour (seeded), so the AUC
a model can reach is known: the hidden model itself scores 0.82 on the evaluation log.
``--backend tensorflow`` runs the same program on TensorFlow 1.x's Estimators (TensorFlow 2.15
and tensorflow-estimator, the last with ``tf.estimator``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Optional, Sequence

import numpy as np

if "--backend" in sys.argv and sys.argv[sys.argv.index("--backend") + 1:][:1] == ["tensorflow"]:
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()
else:
    import tensorgrid as tf

SITES = 60
DEVICES = ["mobile", "desktop", "tablet"]


def make_log(examples: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Features, clicks and the hidden model's click probabilities of ``examples`` impressions."""
    hidden = np.random.default_rng(12345)
    site_effect = hidden.normal(scale=1.2, size=SITES)
    device_effect = np.array([0.6, -0.4, 0.1])
    rng = np.random.default_rng(seed)
    site = (SITES * rng.random(examples) ** 2).astype(np.int64)  # a heavy head, as real traffic has
    device = rng.integers(0, len(DEVICES), size=examples)
    hour = rng.integers(0, 24, size=examples)
    logit = site_effect[site] + device_effect[device] + np.sin(hour / 24 * 2 * np.pi) - 0.5
    probability = 1.0 / (1.0 + np.exp(-logit))
    clicked = (rng.random(examples) < probability).astype(np.int64)
    features = {"site": np.array([[f"site-{s}"] for s in site]), "device": np.array([[DEVICES[d]] for d in device]),
                "hour": hour.reshape(-1, 1).astype(np.float32)}
    return features, clicked.reshape(-1, 1), probability


TRAIN_LOG = make_log(4096, seed=0)
EVAL_LOG = make_log(1024, seed=1)


def train_input_fn():  # type: ignore[no-untyped-def]
    features, clicked, _ = TRAIN_LOG
    return tf.data.Dataset.from_tensor_slices((features, clicked)).shuffle(4096, seed=0).repeat().batch(64)


def eval_input_fn():  # type: ignore[no-untyped-def]
    features, clicked, _ = EVAL_LOG
    return tf.data.Dataset.from_tensor_slices((features, clicked)).batch(256)


def feature_columns():  # type: ignore[no-untyped-def]
    site = tf.feature_column.categorical_column_with_hash_bucket("site", 100)
    device = tf.feature_column.categorical_column_with_vocabulary_list("device", DEVICES)
    hour = tf.feature_column.bucketized_column(tf.feature_column.numeric_column("hour"), [3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0])
    wide = [site, device, tf.feature_column.crossed_column(["site", "device"], 300)]
    deep = [tf.feature_column.embedding_column(site, 8), tf.feature_column.indicator_column(device),
            tf.feature_column.indicator_column(hour)]
    return wide, deep


def make_estimator(model_dir: str):  # type: ignore[no-untyped-def]
    """The wide-and-deep classifier, its checkpoints in ``model_dir`` (the cluster from TF_CONFIG)."""
    wide, deep = feature_columns()
    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=150, tf_random_seed=0)
    return tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[16, 8],
        linear_optimizer=tf.train.FtrlOptimizer(0.1), dnn_optimizer=tf.train.AdagradOptimizer(0.05), config=config)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="checkpoints and summaries (default: a new temporary one)")
    parser.add_argument("--steps", type=int, default=300, help="the global step to train to")
    parser.add_argument("--backend", choices=("tensorgrid", "tensorflow"), default="tensorgrid",
                        help="the library that runs it (imported before the arguments are parsed)")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    estimator = make_estimator(args.model_dir or tempfile.mkdtemp())
    wide, deep = feature_columns()
    serving_input_receiver_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(
        tf.feature_column.make_parse_example_spec(wide + deep))
    metrics, _ = tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(train_input_fn, max_steps=args.steps),
        tf.estimator.EvalSpec(eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=0,
                              exporters=tf.estimator.FinalExporter("wide_deep", serving_input_receiver_fn)))
    if metrics is None:  # a PS task, or a worker that is not the chief: nothing to report
        return
    _, clicked, probability = EVAL_LOG
    hidden_auc = exact_auc(clicked.ravel(), probability)
    print(f"global step {metrics['global_step']}  auc {metrics['auc']:.4f}  accuracy {metrics['accuracy']:.4f}  "
          f"average_loss {metrics['average_loss']:.4f}  (the hidden model's auc {hidden_auc:.4f})")


def exact_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """The exact ROC AUC: the chance a clicked impression scores above an unclicked one."""
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    positives = labels.sum()
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * (len(labels) - positives)))


if __name__ == "__main__":
    main()
