"""examples/estimator_linear.py runs as a user runs it (a process of its own, no TF_CONFIG): it trains
to max_steps with train_and_evaluate, writes the checkpoints and the eval summaries to its
model_dir, and learns the line it was generated from."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]


def test_the_example_trains_evaluates_and_predicts(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPOSITORY / "runtime"), environment.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, str(REPOSITORY / "examples" / "estimator_linear.py"),
                             "--model-dir", str(tmp_path), "--steps", "200"],
                            capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    reported = re.search(r"global step (\d+)  eval loss ([\d.]+)  mae ([\d.]+)", result.stdout)
    assert reported, result.stdout
    assert int(reported.group(1)) == 200
    assert float(reported.group(2)) < 0.01  # the labels' noise has variance 0.0025
    assert (tmp_path / "checkpoint").exists() and (tmp_path / "model.ckpt-200.index").exists()
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "eval"))
