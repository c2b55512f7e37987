"""examples/wide_deep_estimator.py under ``tensorgrid local --evaluator``, as a TFJob with an
Evaluator replica runs it: a chief and a worker train over a PS task while the evaluator task
(TF_CONFIG type ``evaluator``, outside the cluster) evaluates each new checkpoint, writes its
metrics as event files under model_dir/eval, and exits once it has evaluated the final one."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    _, clicked, probability = example.EVAL_LOG
    assert final["auc"] > example.exact_auc(clicked.ravel(), probability) - 0.07, final
