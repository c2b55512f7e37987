"""Real clusters for tests: every task a separate ``python -m tensorgrid server`` process on loopback.

``TENSORGRID_FAKE_GPU=strict`` (in this process's environment, or in a task's
``extra_env``) starts tasks as on a GPU node: each sees one GPU, the strict cupy
stand-in (``strict_cupy.py``) importable as ``cupy``, so ops default to the GPU there
and any implicit conversion of a device array fails. ``0`` or unset: no GPU.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Optional

import numpy as np

import tensorgrid as tf
from tensorgrid.distributed.rpc import ports

FAKE_GPU_VARIABLE = "TENSORGRID_FAKE_GPU"
STRICT_GPU_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "strict_gpu")
"""The folder whose ``cupy`` module is the strict stand-in (``strict_gpu/cupy.py``)."""


def strict_gpu_requested(env: Optional[dict[str, str]] = None) -> bool:
    """Whether ``TENSORGRID_FAKE_GPU`` (of ``env``, default this process's) asks for the strict GPU."""
    mode = (os.environ if env is None else env).get(FAKE_GPU_VARIABLE, "")
    if mode not in ("", "0", "strict"):
        raise ValueError(f"{FAKE_GPU_VARIABLE}={mode!r}; valid values are 'strict', '0' or unset")
    return mode == "strict"


def task_environment(extra_env: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The environment of a process started by a test (a task, ``tensorgrid local``):
    this process's, with ``extra_env`` and unbuffered output; with
    ``TENSORGRID_FAKE_GPU=strict`` the strict cupy stand-in comes first on
    ``PYTHONPATH``, for that process and the processes it starts."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    if strict_gpu_requested(env):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (STRICT_GPU_PATH, env.get("PYTHONPATH", "")) if p)
    return env


class TaskProcess:
    def __init__(self, job: str, index: int, address: str, cluster: dict[str, list[str]], log_path: str,
                 extra_env: Optional[dict[str, str]] = None) -> None:
        self.job, self.index, self.address, self.cluster, self.log_path = job, index, address, cluster, log_path
        self.extra_env = extra_env or {}
        self.process: Optional[subprocess.Popen[bytes]] = None

    @property
    def target(self) -> str:
        return f"grpc://{self.address}"

    def start(self, wait: bool = True, command: Optional[list[str]] = None) -> "TaskProcess":
        """Runs ``command`` (default: ``tensorgrid server``) as this task, output to its log file."""
        env = task_environment(self.extra_env)
        env["TF_CONFIG"] = json.dumps({"cluster": self.cluster, "task": {"type": self.job, "index": self.index}})
        log = open(self.log_path, "ab")
        argv = command or [sys.executable, "-m", "tensorgrid", "server"]
        self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        if wait:
            self.wait_listening()
        return self

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.job}:{self.index} still running after {timeout} s:\n{self.log()}") from None

    def wait_for_output(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.job}:{self.index} exited before printing {text!r}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.job}:{self.index} did not print {text!r} in {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def wait_listening(self, timeout: float = 30.0) -> None:
        host, port = self.address.rsplit(":", 1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.job}:{self.index} exited with {self.process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection((host, int(port)), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"{self.job}:{self.index} did not listen on {self.address}:\n{self.log()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-20000:]
        except OSError:
            return ""


class LocalCluster:
    """``{job: count}`` tasks as server processes; a context manager that always cleans up."""

    def __init__(self, tmp_path: str, jobs: dict[str, int], start: bool = True,
                 extra_env: Optional[dict[str, str]] = None) -> None:
        free = iter(ports.free_ports(sum(jobs.values())))
        self.cluster = {job: [f"localhost:{next(free)}" for _ in range(n)] for job, n in jobs.items()}
        self.tasks = {
            (job, i): TaskProcess(job, i, address, self.cluster, os.path.join(str(tmp_path), f"{job}{i}.log"),
                                  extra_env)
            for job, addresses in self.cluster.items() for i, address in enumerate(addresses)
        }
        if start:
            for task in self.tasks.values():
                task.start(wait=False)
            for task in self.tasks.values():
                task.wait_listening()

    def task(self, job: str, index: int = 0) -> TaskProcess:
        return self.tasks[(job, index)]

    def target(self, job: str, index: int = 0) -> str:
        return self.task(job, index).target

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self.tasks.values():
            task.kill()


def train_three_steps(target: str) -> Any:
    """Three SGD steps of ``sum(x @ w)`` with ``w`` (3x2, ones) on the PS and the step on
    worker 0; returns ``w``, which is then -2 everywhere (gradient 2, rate 0.5, 3 steps)."""
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.ones((3, 2), np.float32), name="w")
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [None, 3])
            loss = tf.reduce_sum(tf.matmul(x, w))
            train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session(target, graph=g) as sess:
        sess.run(w.initializer)
        for _ in range(3):
            sess.run(train, {x: np.ones((2, 3), np.float32)})
        return sess.run(w)


class BackgroundTraining:
    """SGD steps of ``sum(x @ w)``, ``w`` on the PS and the step on the worker, run in a
    loop by a thread of this process until closed; ``advance`` waits for more steps."""

    def __init__(self, target: str) -> None:
        with tf.Graph().as_default() as graph:
            with tf.device("/job:ps/task:0"):
                self.w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
            with tf.device("/job:worker/task:0"):
                self.x = tf.placeholder(tf.float32, [None, 3])
                loss = tf.reduce_sum(tf.matmul(self.x, self.w))
                self.train = tf.train.GradientDescentOptimizer(0.001).minimize(loss)
        self.session = tf.Session(target, graph=graph)
        self.session.run(self.w.initializer)
        self.steps = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        feed = {self.x: np.ones((2, 3), np.float32)}
        try:
            while not self._stop.is_set():
                self.session.run(self.train, feed)
                self.steps += 1
        except BaseException as e:  # noqa: BLE001 - reported by advance()
            self.error = e

    def advance(self, steps: int = 20, timeout: float = 120.0) -> None:
        """Waits until the loop made ``steps`` more steps; fails if it failed or stalled."""
        target = self.steps + steps
        deadline = time.monotonic() + timeout
        while self.steps < target:
            if self.error is not None:
                raise AssertionError(f"training failed: {self.error!r}")
            assert time.monotonic() < deadline, f"training stalled at step {self.steps}"
            time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.session.close()
        assert self.error is None, f"training failed: {self.error!r}"
