"""The programs `make tools` builds (hack/tools.sh) that tests run beside the control plane: where
they are, and how a test stops one.

Why it exists: KWOK, scheduler-plugins and the cert-manager harness are each found the same way
(skipped where they were not built, a failure under CI=true, where a missing tool must fail the
run) and each stopped the same way (terminate, then kill after 30 s).
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def built(flag: str, *names: str) -> list[pathlib.Path]:
    """The paths of ``names`` in hack/tools.sh's bin folder; skips (fails under CI=true), naming
    ``flag`` (the tools.sh option that builds them), when any of them is missing."""
    out = subprocess.run([str(ROOT / "hack" / "tools.sh"), "--print-bin-dir"], capture_output=True, text=True,
                         check=True)
    bin_dir = pathlib.Path(out.stdout.strip())
    paths = [bin_dir / name for name in names]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        message = f"no {' or '.join(missing)} in {bin_dir}: build them with `hack/tools.sh {flag}` (`make tools`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return paths


def stop(*processes: "subprocess.Popen[bytes]") -> None:
    """Terminates ``processes`` together, then waits for each, killing one that takes over 30 s."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
