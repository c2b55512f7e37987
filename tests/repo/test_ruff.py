"""The code passes ruff with the rules of pyproject.toml (defects, naming, and no needless `# noqa`)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ruff_finds_nothing():
    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    assert os.path.exists(ruff), f"ruff is not installed next to {sys.executable}: install the dev extra"
    result = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", ROOT], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
