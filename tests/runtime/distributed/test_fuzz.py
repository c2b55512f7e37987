"""A bounded fuzzing run in ``make test``: every parser of bytes from the network answers
every input with a status (tests/runtime/support/fuzz/targets.py; ``make fuzz`` runs them for minutes).

Each target runs in its own process (libFuzzer ends the process when it is done), with
atheris when it is installed. Without it the same targets run under the seeded random
mutator of ``run.py``, except in CI, where a missing atheris is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys

import pytest

RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support", "fuzz", "run.py")
RUNS = {"header_bundle": 40000, "frames": 40000, "data_channel": 3000, "servicer": 80000}
"""Inputs per target: about a minute in all on this project's 2-core machine (2.5 times as many
took 135 s of a CI run; ``make fuzz`` is the long run)."""

pytestmark = [pytest.mark.timeout(600)]


@pytest.mark.parametrize("target", sorted(RUNS))
def test_every_input_is_answered_with_a_status(target):
    env = dict(os.environ)
    if importlib.util.find_spec("atheris") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("atheris is not installed (pip install -e '.[dev]'); the fuzz targets need it in CI")
        env["TENSORGRID_FUZZ_DRIVER"] = "random"
    # libFuzzer's memory limit (2048 MB) is on the peak RSS the kernel reports, which a process
    # inherits from this one across fork and exec: allow for the test process's own peak.
    rss_limit_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 + 2048
    result = subprocess.run([sys.executable, RUN, target, f"-runs={RUNS[target]}", "-seed=1",
                             f"-rss_limit_mb={rss_limit_mb}"], env=env, capture_output=True, text=True, timeout=540)
    output = "\n".join(line for line in (result.stdout + result.stderr).splitlines()
                       if not line.startswith("INFO: Instrumenting"))
    assert result.returncode == 0, f"fuzz target {target} found an input that escaped:\n{output[-8000:]}"
