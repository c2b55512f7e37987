"""examples/layers_cnn_digits.py, a TF1 ``tf.layers`` CNN, trained between-graph by
``tensorgrid local --ps 1 --workers 2``: every task ends 0 and each worker's loss falls."""

import os
import re
import subprocess
import sys

import pytest

from cluster_processes import task_environment

pytestmark = [pytest.mark.timeout(300), pytest.mark.gpu_node]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "examples", "layers_cnn_digits.py")


def test_the_tf_layers_cnn_example_trains_on_two_workers(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--",
         sys.executable, PROGRAM, "--steps", "160", "--log-every", "20", "--min-accuracy", "0.5",
         "--checkpoint-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=280, env=task_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tasks: ps:0=0, worker:0=0, worker:1=0" in result.stdout
    falls = re.findall(r"(worker:\d) done: .* mean loss (\S+) over the first \d+ -> (\S+) over the last", result.stdout)
    assert sorted(worker for worker, _, _ in falls) == ["worker:0", "worker:1"], result.stdout
    for worker, first, last in falls:
        assert float(last) < 0.7 * float(first), (worker, first, last)
    assert float(re.search(r"test accuracy (\S+)", result.stdout).group(1)) >= 0.5
