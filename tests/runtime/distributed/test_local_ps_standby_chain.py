"""``tensorgrid local --ps-standby`` survives losing the same PS twice: 1 PS, 2 workers, no
checkpoint directory. The PS process is SIGKILLed: the launcher tells its standby to take over
and starts the next standby at the address the standby served at; the promoted process is
SIGKILLed too: the next standby takes over with the replica the promoted PS pushed it. After
each loss worker:0's next global steps are within a few steps of the last before it."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from cluster_processes import task_environment
from ps_failover_support import PROGRAM
from ps_failover_support import reports

pytestmark = [pytest.mark.timeout(180)]

# Trains until the test stops the launcher: the losses come at steps the test waits for.
COMMAND = [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--ps-standby", "--",
           sys.executable, PROGRAM, "--steps", "1000000", "--log-every", "5", "--pace-ms", "10", "--rows", "200"]
MARGIN_STEPS = 40  # the lag (1 s at most) of a few dozen steps a second, and the steps in flight
PUSHED_WHOLE_STATE = "/job:ps/replica:0/task:0: pushed its whole state to the standby of /job:ps/replica:0/task:0"


class _Launcher:
    """``tensorgrid local`` with its output collected line by line."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(COMMAND, env=task_environment(), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, count: int = 1, timeout: float = 60) -> list[str]:
        """The groups of the ``count``-th match of ``pattern`` in the output, once there."""
        deadline = time.monotonic() + timeout
        while len(found := re.findall(pattern, self.output())) < count:
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"{pattern!r} not seen {count} times in {timeout} s:\n{self.output()}"
            time.sleep(0.05)
        match = found[count - 1]
        return list(match) if isinstance(match, tuple) else [match]

    def steps(self) -> list[int]:
        return [step for step, _ in reports(self.output())]

    def wait_for_step(self, step: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not self.steps() or self.steps()[-1] < step:
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"no global step {step} in {timeout} s:\n{self.output()}"
            time.sleep(0.05)

    def lose(self, pid: int) -> tuple[int, int]:
        """SIGKILLs ``pid`` at worker:0's latest step; (that step, the least step reported after it,
        once the steps went past it)."""
        before = self.steps()
        os.kill(pid, signal.SIGKILL)
        self.wait_for_step(before[-1] + 1)
        return before[-1], min(self.steps()[len(before):])

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        finally:
            self._reader.join(timeout=10)


def test_tensorgrid_local_starts_the_next_standby_after_a_takeover_and_survives_a_second_loss():
    launcher = _Launcher()
    try:
        ps_pid, standby_pid = (int(pid) for pid in launcher.wait_for(r"pids ps-standby:0=(\d+), ps:0=(\d+)")[::-1])
        launcher.wait_for(r"\[ps:0\] .*" + re.escape(PUSHED_WHOLE_STATE))
        launcher.wait_for_step(20)
        losses = [launcher.lose(ps_pid)]
        said = launcher.wait_for(r"the standby ps-standby:0 \(pid (\d+)\) took over as ps:0 .*; started the next "
                                 r"standby ps-standby:0#2 \(pid (\d+)\)")
        assert int(said[0]) == standby_pid, launcher.output()
        launcher.wait_for(r"\[ps-standby:0\] .*" + re.escape(PUSHED_WHOLE_STATE))  # the next standby holds the replica
        launcher.wait_for_step(losses[-1][1] + 10)
        losses.append(launcher.lose(standby_pid))
        launcher.wait_for(r"\[ps-standby:0#2\] .*a standby took over at .*from the replica it held")
        launcher.wait_for(r"started the next standby ps-standby:0#3")
        launcher.wait_for_step(losses[-1][1] + 10)
    finally:
        status = launcher.stop()
    output = launcher.output()
    assert status == 128 + signal.SIGTERM, output
    assert "exited (signal 9): its standby ps-standby:0 (pid" in output
    assert "exited (signal 9): its standby ps-standby:0#2 (pid" in output
    assert "Initializing the model" not in output.split("A step failed", 1)[1]  # the model was never lost
    for before, resumed in losses:
        assert resumed >= before - MARGIN_STEPS, (losses, output[-5000:])
