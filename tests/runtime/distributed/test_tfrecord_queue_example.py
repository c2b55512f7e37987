"""examples/tfrecord_queue_reader.py, a TF1 queue pipeline over TFRecord files (string_input_producer,
TFRecordReader, shuffle_batch), trained between-graph by ``tensorgrid local --ps 1 --workers 2``:
each worker reads its epochs and stops when its input ends, every task ends 0 and the loss falls."""

import math
import os
import re
import subprocess
import sys

import pytest

from cluster_processes import task_environment

pytestmark = [pytest.mark.timeout(300), pytest.mark.gpu_node]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "examples", "tfrecord_queue_reader.py")
TRAIN_DIGITS = 1437


def test_the_queue_reader_example_trains_two_workers_until_their_epochs_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--",
         sys.executable, PROGRAM, "--num-epochs", "2", "--log-every", "20", "--min-accuracy", "0.6",
         "--data-dir", str(tmp_path / "data"), "--checkpoint-dir", str(tmp_path / "checkpoints")],
        capture_output=True, text=True, timeout=280, env=task_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tasks: ps:0=0, worker:0=0, worker:1=0" in result.stdout
    assert len(list((tmp_path / "data").glob("*.tfrecord"))) == 4
    done = re.findall(r"(worker:\d) done: (\d+) local steps .* mean loss (\S+) over the first \d+ -> (\S+) over the "
                      r"last", result.stdout)
    assert sorted(worker for worker, *_ in done) == ["worker:0", "worker:1"], result.stdout
    for worker, steps, first, last in done:
        # Two epochs of the training digits in batches of 32, the last one smaller: then OutOfRange ends it.
        assert int(steps) == math.ceil(2 * TRAIN_DIGITS / 32), (worker, steps)
        assert float(last) < 0.7 * float(first), (worker, first, last)
    assert float(re.search(r"test accuracy (\S+)", result.stdout).group(1)) >= 0.6
