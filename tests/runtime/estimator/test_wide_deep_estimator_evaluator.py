"""examples/wide_deep_estimator.py under ``tensorgrid local --evaluator``, as a TFJob with an
Evaluator replica runs it: a chief and a worker train over a PS task while the evaluator task
(TF_CONFIG type ``evaluator``, outside the cluster) evaluates each new checkpoint, writes its
metrics as event files under model_dir/eval, exports the final one (its FinalExporter) and exits;
the export, loaded in this process, predicts as the Estimator does."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

import tensorgrid

REPOSITORY = Path(__file__).resolve().parents[3]
EXAMPLE = REPOSITORY / "examples" / "wide_deep_estimator.py"
STEPS = 300


def eval_scalars(tf1: Any, directory: Path) -> dict[int, dict[str, float]]:
    """Every scalar of the event files in ``directory``, by global step and tag (read by TensorFlow)."""
    scalars: dict[int, dict[str, float]] = {}
    for path in sorted(glob.glob(str(directory / "events.out.tfevents.*"))):
        for event in tf1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars.setdefault(event.step, {})[value.tag] = value.simple_value
    return scalars


def test_the_evaluator_task_evaluates_each_checkpoint_and_stops_after_the_last(tf1: Any, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPOSITORY / "runtime"),
                                                                os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "tensorgrid", "local", "--chief", "--workers", "1", "--ps", "1",
                          "--evaluator", "--", sys.executable, str(EXAMPLE), "--model-dir", str(model_dir),
                          "--steps", str(STEPS)],
                         capture_output=True, text=True, timeout=240, env=environment, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "evaluator:0=0" in run.stdout, run.stdout[-3000:]  # it ended by itself, before the stop timeout
    assert "[evaluator:0]" in run.stdout and "Exiting evaluation" in run.stdout, run.stdout[-3000:]
    assert "Saving dict for global step" not in "".join(line for line in run.stdout.splitlines(keepends=True)
                                                          if not line.startswith("[evaluator:0]"))

    final_step = int(open(model_dir / "checkpoint").read().split('"')[1].rsplit("-", 1)[1])
    assert final_step >= STEPS
    scalars = eval_scalars(tf1, model_dir / "eval")
    assert len(scalars) >= 2 and max(scalars) == final_step, sorted(scalars)
    final = scalars[final_step]
    assert {"auc", "accuracy", "average_loss", "loss", "precision", "recall"} <= set(final), final

    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import wide_deep_estimator as example
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    features, clicked, probability = example.EVAL_LOG
    assert final["auc"] > example.exact_auc(clicked.ravel(), probability) - 0.07, final

    (export,) = glob.glob(str(model_dir / "export" / "wide_deep" / "*"))
    rows = {name: values[:16] for name, values in features.items()}
    served = serve(export, rows)
    estimator = example.make_estimator(str(model_dir))
    predicted = [p["logistic"] for p in estimator.predict(
        lambda: tensorgrid.data.Dataset.from_tensor_slices(rows).batch(16))]
    np.testing.assert_allclose(served, np.array(predicted), rtol=1e-5, atol=1e-6)


def serve(export: str, rows: dict[str, np.ndarray]) -> np.ndarray:
    """The click probabilities the exported model's ``predict`` signature gives for ``rows`` as tf.Examples."""
    tf = tensorgrid
    examples = []
    for site, device, hour in zip(rows["site"][:, 0], rows["device"][:, 0], rows["hour"][:, 0]):
        feature = {"site": tf.train.Feature(bytes_list=tf.train.BytesList(value=[site.encode()])),
                   "device": tf.train.Feature(bytes_list=tf.train.BytesList(value=[device.encode()])),
                   "hour": tf.train.Feature(float_list=tf.train.FloatList(value=[float(hour)]))}
        examples.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        signature = tf.saved_model.loader.load(session, [tf.saved_model.tag_constants.SERVING],
                                               export).signature_def["predict"]
        return np.asarray(session.run(graph.get_tensor_by_name(signature.outputs["logistic"].name),
                                      {graph.get_tensor_by_name(signature.inputs["examples"].name): examples}))
