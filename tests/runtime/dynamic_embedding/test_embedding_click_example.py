"""examples/embedding_click_model.py under ``tensorgrid local``: raw 64-bit ids in partitioned embedding
variables on two PS processes, admission by count, eviction at the chief's checkpoints."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from typing import Any

import tensorgrid as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_the_click_example_trains_on_two_ps_and_evicts_at_its_checkpoints(tmp_path: Any) -> None:
    program = os.path.join(ROOT, "examples", "embedding_click_model.py")
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "2", "--workers", "1", "--",
         sys.executable, program, "--steps", "60", "--log-every", "30", "--save-steps", "30",
         "--steps-to-live", "5", "--checkpoint-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=170)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 embedding variables in 2 parts on 2 PS" in result.stdout
    assert re.search(r"worker:0 loss fell from (\S+) to (\S+)", result.stdout), result.stdout
    # The sizes the last step read, before the final checkpoint's save evicted the ids not updated
    # in its last 5 steps: the checkpoint holds fewer.
    before_save = ast.literal_eval(re.findall(r"ids stored: (\{.*\})", result.stdout)[-1])
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
    saved = sum(reader.get_tensor(f"user_vector/part_{part}-keys").size for part in (0, 1))
    assert 0 < saved < before_save["user_vector"]
    assert reader.get_tensor("user_vector/part_0/Adagrad-values").shape[1] == 8
