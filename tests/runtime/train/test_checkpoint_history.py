"""Checkpoint history survives a chief killed while saving: after restarts, ``max_to_keep``
still bounds the checkpoints on disk and nothing of an interrupted save stays behind;
a write that fails names the file.

The chief is a real process (a MonitoredTrainingSession saving every step), killed
with SIGKILL at arbitrary moments and started again on the same directory.
"""

import os
import random
import re
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from cluster_processes import task_environment
from tensorgrid.train import checkpoint_format

pytestmark = [pytest.mark.timeout(300)]

CHIEF = """
import sys
import numpy as np
import tensorgrid as tf

checkpoint_dir, last_step = sys.argv[1], int(sys.argv[2])
w = tf.Variable(np.ones((64, 64), np.float32), name="w")
step = tf.train.get_or_create_global_step()
train = tf.group(tf.assign_sub(w, 0.001 * w), tf.assign_add(step, 1))
with tf.train.MonitoredTrainingSession(checkpoint_dir=checkpoint_dir, save_checkpoint_steps=1,
                                       hooks=[tf.train.StopAtStepHook(last_step=last_step)],
                                       log_step_count_steps=0) as sess:
    while not sess.should_stop():
        print("global step", sess.run([train, step])[1], flush=True)
"""


def _chief(directory, last_step):
    return subprocess.Popen([sys.executable, "-c", CHIEF, str(directory), str(last_step)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=task_environment(), start_new_session=True)


def _checkpoints(directory):
    return sorted(int(m.group(1)) for name in os.listdir(directory)
                  for m in [re.fullmatch(r"model\.ckpt-(\d+)\.index", name)] if m)


def test_max_to_keep_holds_across_chief_kills_and_interrupted_saves_are_cleaned(tmp_path):
    rng = random.Random(13)
    kills = 0
    while kills < 12:
        chief = _chief(tmp_path, 100000)
        seen = [chief.stdout.readline()]
        while not seen[-1].startswith(b"global step"):  # trains, and saves every step from now on
            assert seen[-1], b"".join(seen)
            seen.append(chief.stdout.readline())
        time.sleep(rng.uniform(0.0, 0.3))
        os.killpg(chief.pid, signal.SIGKILL)
        chief.wait()
        chief.stdout.close()
        kills += 1
    reached = max(_checkpoints(tmp_path))
    # A write cut short by the kill, as the kills above may or may not have left one.
    interrupted = tmp_path / f"model.ckpt-{reached + 1}.data.tmp-0badf00d"
    interrupted.write_bytes(b"\0" * 100)
    chief = _chief(tmp_path, reached + 10)
    output = chief.communicate(timeout=120)[0].decode()
    assert chief.returncode == 0, output
    steps = _checkpoints(tmp_path)
    assert len(steps) <= 5, steps
    assert steps[-1] == reached + 10
    leftovers = [n for n in os.listdir(tmp_path) if checkpoint_format.is_temporary(n)]
    assert not leftovers
    indexed = {f"model.ckpt-{s}" for s in steps}
    for name in os.listdir(tmp_path):
        if name.startswith("events.out.tfevents."):
            continue  # the chief's summaries (MonitoredTrainingSession writes them beside its checkpoints)
        assert name == "checkpoint" or name.rsplit(".", 1)[0].replace(".data", "") in indexed, name
    assert min(int(s) for s in re.findall(r"global step (\d+)", output)) >= reached


def test_a_write_that_fails_names_the_file(tmp_path):
    previous = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, previous[1]))  # writes past 4 KiB fail, as on a full disk
    try:
        with pytest.raises(OSError, match=r"while writing checkpoint file") as caught:
            checkpoint_format.write_checkpoint(str(tmp_path / "model.ckpt-1"), {"w": np.ones(10000, np.float32)})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous)
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert caught.value.filename == str(tmp_path / "model.ckpt-1.data")
    assert str(tmp_path / "model.ckpt-1.data") in str(caught.value)
    assert os.listdir(tmp_path) == []
