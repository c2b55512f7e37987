"""The example programs learn: a TF1-style MLP and CNN reach the test accuracy users expect.

The examples run as they would for a user (their ``train`` with command-line flags, or
the script itself), on the real 8x8 digits with fixed seeds. Over seeds 0-3, tensorgrid
reaches 0.967-0.989 (MLP, Adam, 1000 steps) and 0.969-0.992 (CNN, 300 steps), and
TensorFlow itself 0.969-0.983 and 0.983-0.989: the bounds below leave room for another
random initialisation, not for a bug.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys
import types

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"
PROGRESS_LINE = re.compile(r"^step +(\d+)  loss (\d+\.\d{4})  train accuracy (\d\.\d{3}) +(\d+) examples/s$")


def load_example(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mlp_example_learns_the_digits(capsys: pytest.CaptureFixture[str]) -> None:
    result = load_example("digits_mlp").train(["--steps", "1000", "--seed", "0", "--log-every", "250"])
    output = capsys.readouterr().out.splitlines()
    assert result["test_accuracy"] >= 0.95, "\n".join(output)
    progress = [PROGRESS_LINE.match(line) for line in output[:-1]]
    assert all(progress), output
    assert [int(m.group(1)) for m in progress if m] == [250, 500, 750, 1000]
    first_loss, last_loss = float(progress[0].group(2)), float(progress[-1].group(2))  # type: ignore[union-attr]
    assert last_loss < first_loss < 2.5
    assert re.fullmatch(r"test accuracy 0\.\d{4} on 360 held-out digits after 1000 steps \(tensorgrid\)", output[-1])


def test_cnn_example_learns_the_digits(capsys: pytest.CaptureFixture[str]) -> None:
    result = load_example("digits_cnn").train(["--steps", "300", "--seed", "0", "--log-every", "100"])
    output = capsys.readouterr().out
    assert result["test_accuracy"] >= 0.95, output


def test_mlp_example_learns_with_plain_gradient_descent(capsys: pytest.CaptureFixture[str]) -> None:
    result = load_example("digits_mlp").train(
        ["--steps", "600", "--optimizer", "sgd", "--learning-rate", "0.1", "--seed", "1", "--log-every", "600"])
    assert result["test_accuracy"] >= 0.93, capsys.readouterr().out


def test_example_script_fails_below_the_accuracy_threshold() -> None:
    command = [sys.executable, str(EXAMPLES / "digits_mlp.py"), "--steps", "5", "--min-accuracy", "1.01"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "test accuracy" in finished.stdout
    assert re.search(r"FAILED: test accuracy 0\.\d{4} is below --min-accuracy 1\.01", finished.stderr)
