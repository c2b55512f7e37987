"""``tensorgrid devices``: what a server on this machine would expose, or why it has no GPU,
for a user checking a GPU pod. Run as a user runs it, in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Optional

import cluster_processes


def _devices(env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tensorgrid", "devices", *flags], env=env, capture_output=True,
                          text=True, timeout=60)


def _env_with_cupy(tmp_path: Path, fake_cupy: Optional[str]) -> dict[str, str]:
    env = cluster_processes.task_environment({cluster_processes.FAKE_GPU_VARIABLE: "0"})
    if fake_cupy is not None:
        (tmp_path / "cupy.py").write_text(fake_cupy)
        env["PYTHONPATH"] = f"{tmp_path}:{env.get('PYTHONPATH', '')}"
    return env


# cupy as a machine without it has it, also where it is installed (a GPU machine).
NO_CUPY = "raise ModuleNotFoundError(\"No module named 'cupy'\", name='cupy')\n"


def test_without_cupy_it_lists_the_cpu_and_says_why_there_is_no_gpu(tmp_path: Path) -> None:
    result = _devices(_env_with_cupy(tmp_path, NO_CUPY))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["/device:CPU:0  CPU",
                                          "no GPU: cupy is not installed (pip install 'tensorgrid[gpu]')"]
    assert _devices(_env_with_cupy(tmp_path, NO_CUPY), "--require-gpu").returncode == 1


def test_each_gpu_is_listed_with_its_name_and_memory() -> None:
    env = cluster_processes.task_environment({cluster_processes.FAKE_GPU_VARIABLE: "strict"})
    result = _devices(env, "--require-gpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["/device:CPU:0  CPU",
                                          "/device:GPU:0  GPU  strict cupy stand-in (host memory, not a GPU), 16.0 GiB"]


def test_no_visible_device_and_a_failing_driver_are_told_apart(tmp_path: Path) -> None:
    no_device = ("class _Runtime:\n"
                 "    @staticmethod\n"
                 "    def getDeviceCount():\n"
                 "        raise RuntimeError('cudaErrorNoDevice: no CUDA-capable device is detected')\n"
                 "class cuda:\n"
                 "    runtime = _Runtime\n")
    result = _devices(_env_with_cupy(tmp_path, no_device))
    assert result.stdout.splitlines()[1] == "no GPU: no CUDA device is visible (cudaErrorNoDevice: no CUDA-capable device is detected)"
    old_driver = no_device.replace("cudaErrorNoDevice: no CUDA-capable device is detected",
                                   "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")
    result = _devices(_env_with_cupy(tmp_path, old_driver), "--require-gpu")
    assert result.returncode == 1
    assert result.stdout.splitlines()[1] == ("no GPU: the CUDA driver failed: RuntimeError: cudaErrorInsufficientDriver: "
                                             "CUDA driver version is insufficient for CUDA runtime version")
