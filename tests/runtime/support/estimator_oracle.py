"""The oracle of tf.estimator: runs ``estimator_programs``' programs on TensorFlow 2.15.1's Estimators.

TensorFlow removed ``tf.estimator`` in 2.16, so its last Estimators (TensorFlow 2.15.1 and
tensorflow-estimator 2.15.0, the ``estimator-oracle`` extra) live in a virtualenv of their own,
``.venv-estimator-oracle`` (``make estimator-oracle``). The tests run this script with that
virtualenv's Python: ``estimator_oracle.py MODULE PROGRAM...`` prints one JSON object, program name ->
what ``run(model_dir)`` returned (or ``{"error", "message"}``), each run in a new model directory;
MODULE is the support module holding the programs (``estimator_programs``, ``canned_estimator_programs``).

From the test process, ``run_on_tensorflow`` finds the virtualenv, runs the script, and parses
its answer; without the virtualenv it skips the test, except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[3]
VENV_VARIABLE = "TENSORGRID_ESTIMATOR_ORACLE_VENV"
"""Where the oracle's virtualenv is, when not ``.venv-estimator-oracle`` in the repository."""
ORACLE_TIMEOUT_SECONDS = 300


def oracle_python() -> Path:
    venv = Path(os.environ.get(VENV_VARIABLE) or REPOSITORY / ".venv-estimator-oracle")
    return venv / "bin" / "python"


def run_on_tensorflow(*names: str, programs: str = "estimator_programs") -> dict[str, Any]:
    """Each program's result on TensorFlow 2.15.1's Estimators, by name (one subprocess for all);
    ``programs`` names the support module that holds them."""
    import pytest

    python = oracle_python()
    if not python.exists():
        message = (f"TensorFlow 2.15.1's Estimators are the oracle of this test: `make estimator-oracle` "
                   f"makes {python.parent.parent} (the estimator-oracle extra)")
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the estimator oracle tests. {message}")
        pytest.skip(message)
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    environment.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([str(python), __file__, programs, *names], capture_output=True, text=True,
                            timeout=ORACLE_TIMEOUT_SECONDS, env=environment)
    if result.returncode != 0:
        raise AssertionError(f"the estimator oracle failed ({result.returncode}):\n{result.stderr[-4000:]}")
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def assert_close(ours: Any, theirs: Any, path: str = "") -> None:
    """Equal structure and strings; numbers within 1e-4 (both sides round to 5 decimals)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), f"{path}: {ours} != {theirs}"
        for key in theirs:
            assert_close(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list) and theirs and not isinstance(theirs[0], (int, float)):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{path}: {ours} != {theirs}"
        for index, (mine, other) in enumerate(zip(ours, theirs)):
            assert_close(mine, other, f"{path}[{index}]")
    elif isinstance(theirs, (int, float, list)) and not isinstance(theirs, bool):
        np.testing.assert_allclose(ours, theirs, atol=1e-4, err_msg=path)
    else:
        assert ours == theirs, f"{path}: {ours!r} != {theirs!r}"


def main(module: str, names: list[str]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import importlib

    import tensorflow.compat.v1 as tf

    programs = importlib.import_module(module)

    tf.disable_v2_behavior()
    tf.logging.set_verbosity(tf.logging.ERROR)
    results = {}
    for name in names:
        with tempfile.TemporaryDirectory() as model_dir:
            tf.reset_default_graph()
            results[name] = programs.run_program(tf, name, model_dir)
    print(json.dumps(results), flush=True)
    sys.stderr.flush()
    # The results are out: end without the interpreter's finalization, in which a TensorFlow daemon
    # thread left by a program (numpy_input_fn's feeding queue runners) may be unwound inside C++
    # code that swallows the unwind, which aborts the process ("terminate called after throwing an
    # instance of ''", exit -6: seen once in CI at load, 7 tests failed on it).
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
