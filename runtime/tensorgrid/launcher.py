"""``tensorgrid local``: a cluster of processes on loopback, for development and demos.

Starts one process per task with its own ``TF_CONFIG`` (free ports on 127.0.0.1), and with
``--evaluator`` one more, outside the cluster (it serves nothing, so it gets no certificate),
streams every task's output with a ``[job:index]`` prefix, and when the chief exits
gives the other tasks a moment to finish, stops whatever is still running, and
exits with the chief's status. Ctrl-C, SIGTERM and SIGHUP stop every task at once
(the tasks run in sessions of their own, so no signal reaches them otherwise).

Tasks talk mutual TLS: each run makes a fresh CA (its key only in memory) and one
certificate per task for the loopback names, in a temporary directory removed when the
run ends; each task finds its own through ``TENSORGRID_TLS_DIR``. With
``TENSORGRID_INSECURE=1`` (and no ``TENSORGRID_TLS_DIR``) no certificates are made and the
tasks run without TLS, warning so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any, Optional, Sequence

from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc.transport import tls

_COLORS = {"chief": "35", "ps": "36", "worker": "32", "evaluator": "33", "ps-standby": "34"}


@dataclasses.dataclass
class LocalClusterSpec:
    ps: int = 1
    workers: int = 2
    chief: bool = False
    sync: bool = False
    ps_server: bool = False
    """Run ``tensorgrid server`` in PS tasks instead of the program (for programs without a PS branch)."""
    stop_timeout: float = 30.0
    """Seconds the other tasks get to finish after the chief exits, before they are terminated."""
    ps_standby: bool = False
    """Start a standby task per PS (``tensorgrid ps-standby``) holding the live replica of its state."""
    evaluator: bool = False
    """Start an ``evaluator`` task too (``train_and_evaluate``'s): TF_CONFIG names it as its task but,
    as TensorFlow has it, not in ``cluster``; it gets ``stop_timeout`` after the chief to finish too."""


STANDBY_JOB = "ps-standby"
EVALUATOR_JOB = "evaluator"


def cluster_for(spec: LocalClusterSpec) -> dict[str, list[str]]:
    jobs = {"ps": spec.ps, "worker": spec.workers}
    if spec.chief:
        jobs = {"chief": 1, **jobs}
    free = iter(ports.free_ports(sum(jobs.values())))
    return {job: [f"localhost:{next(free)}" for _ in range(n)] for job, n in jobs.items() if n > 0}


class _Task:
    def __init__(self, job: str, index: int, process: subprocess.Popen[bytes]) -> None:
        self.job = job
        self.index = index
        self.process = process

    @property
    def label(self) -> str:
        return f"{self.job}:{self.index}"


def _pump(task: _Task, out: IO[str], color: bool, lock: threading.Lock) -> None:
    assert task.process.stdout is not None
    prefix = f"[{task.label}]"
    if color:
        prefix = f"\033[{_COLORS.get(task.job, '0')}m{prefix}\033[0m"
    for raw in iter(task.process.stdout.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        with lock:
            out.write(f"{prefix} {line}\n")
            out.flush()


def run(spec: LocalClusterSpec, command: Sequence[str], out: IO[str] = sys.stdout) -> int:
    """Runs ``command`` as every task of a local cluster; returns the chief's exit status."""
    if not command:
        raise ValueError("tensorgrid local needs a command after '--', e.g. -- python train.py")
    if spec.workers < 0 or spec.ps < 0 or (spec.workers == 0 and not spec.chief):
        raise ValueError(f"A cluster needs at least one worker or a chief, got --ps {spec.ps} --workers {spec.workers}")
    cluster = cluster_for(spec)
    insecure = not os.environ.get(tls.TLS_DIR_ENV) and os.environ.get(tls.INSECURE_ENV) == "1"
    with tempfile.TemporaryDirectory(prefix="tensorgrid-local-tls-") as tls_root:
        task_tls_dirs = {} if insecure else _task_certificates(cluster, tls_root)
        return _run_tasks(spec, cluster, task_tls_dirs, command, out)


def _task_certificates(cluster: dict[str, list[str]], root: str) -> dict[tuple[str, int], str]:
    """A fresh CA for this run and a certificate per task under ``root``: each task's ``TENSORGRID_TLS_DIR``."""
    authority = certificates.new_authority("tensorgrid local CA")
    return {(job, index): certificates.write_task_directory(os.path.join(root, f"{job}-{index}"), authority,
                                                            f"tensorgrid local {job}:{index}")
            for job, addresses in cluster.items() for index in range(len(addresses))}


def _run_tasks(spec: LocalClusterSpec, cluster: dict[str, list[str]], task_tls_dirs: dict[tuple[str, int], str],
               command: Sequence[str], out: IO[str]) -> int:
    color = out.isatty() and not os.environ.get("NO_COLOR")
    lock = threading.Lock()
    tasks: list[_Task] = []
    pumps: list[threading.Thread] = []
    chief_job = "chief" if spec.chief else "worker"
    with lock:
        out.write(f"tensorgrid local: cluster {json.dumps(cluster)}\n")
    started = time.monotonic()
    interrupted = False
    with _StopSignals() as stop_signals:
        try:
            stop_signals.interruptible = True
            _start_tasks(spec, cluster, task_tls_dirs, command, out, color, lock, tasks, pumps)
            chief = next(t for t in tasks if t.job == chief_job and t.index == 0)
            chief_status = chief.process.wait()
        except KeyboardInterrupt:
            interrupted = True
            chief_status = 130
        except _SignalInterruptError as stop:
            interrupted = True
            chief_status = 128 + stop.signum
            with lock:
                out.write(f"tensorgrid local: received signal {stop.signum}: stopping every task\n")
        finally:
            stop_signals.interruptible = False
        return _finish(spec, tasks, pumps, chief_status, interrupted, started, out, lock)


def _finish(spec: LocalClusterSpec, tasks: list[_Task], pumps: list[threading.Thread], chief_status: int,
            interrupted: bool, started: float, out: IO[str], lock: threading.Lock) -> int:
    """Gives the other tasks ``stop_timeout`` to end (none after an interruption), stops the rest,
    and reports every task's status; returns the chief's."""
    deadline = time.monotonic() + (0 if interrupted else spec.stop_timeout)
    standbys = [task for task in tasks if task.job == STANDBY_JOB]
    tasks = [task for task in tasks if task.job != STANDBY_JOB]
    for task in tasks:
        if task.process.poll() is None:
            try:
                task.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    stopped = _stop(tasks)
    _stop(standbys)  # a standby serves until told to stop: not worth a report
    for pump in pumps:
        pump.join(timeout=2)
    summary = ", ".join(f"{t.label}={_status(t.process.returncode)}" for t in tasks)
    with lock:
        out.write(f"tensorgrid local: chief exited {_status(chief_status)} after "
                  f"{time.monotonic() - started:.1f} s; tasks: {summary}"
                  f"{'; stopped: ' + ', '.join(stopped) if stopped else ''}\n")
    return chief_status


def _start_tasks(spec: LocalClusterSpec, cluster: dict[str, list[str]], task_tls_dirs: dict[tuple[str, int], str],
                 command: Sequence[str], out: IO[str], color: bool, lock: threading.Lock, tasks: list[_Task],
                 pumps: list[threading.Thread]) -> None:
    """Starts every task's process and the thread streaming its output, appending each to
    ``tasks`` and ``pumps`` as it starts (a signal during the start stops those already running)."""
    standbys: dict[int, str] = {}
    if spec.ps_standby:
        standbys = {index: f"localhost:{port}" for index, port in enumerate(ports.free_ports(len(cluster.get("ps", []))))}
    for index, address in standbys.items():
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env[replication.STANDBY_FOR_ENV] = cluster_lib.task_name("ps", index)
        if task_tls_dirs:
            env[tls.TLS_DIR_ENV] = task_tls_dirs[("ps", index)]  # the standby answers as its PS would
        _start_task(STANDBY_JOB, index, [sys.executable, "-m", "tensorgrid", "ps-standby", "--address", address],
                    env, out, color, lock, tasks, pumps)
    for job, addresses in cluster.items():
        for index in range(len(addresses)):
            env = dict(os.environ)
            env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": index},
                                           "environment": "cloud"})
            env["PYTHONUNBUFFERED"] = "1"
            env["TENSORGRID_SYNC"] = "1" if spec.sync else "0"
            if task_tls_dirs:
                env[tls.TLS_DIR_ENV] = task_tls_dirs[(job, index)]
            if job == "ps" and index in standbys:
                env[replication.REPLICA_ADDRESS_ENV] = standbys[index]
            argv = list(command)
            if job == "ps" and spec.ps_server:
                argv = [sys.executable, "-m", "tensorgrid", "server"]
            _start_task(job, index, argv, env, out, color, lock, tasks, pumps)
    if spec.evaluator:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": EVALUATOR_JOB, "index": 0},
                                       "environment": "cloud"})
        _start_task(EVALUATOR_JOB, 0, list(command), env, out, color, lock, tasks, pumps)


def _start_task(job: str, index: int, argv: Sequence[str], env: dict[str, str], out: IO[str], color: bool,
                lock: threading.Lock, tasks: list[_Task], pumps: list[threading.Thread]) -> None:
    process = subprocess.Popen(list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    task = _Task(job, index, process)
    tasks.append(task)
    pump = threading.Thread(target=_pump, args=(task, out, color, lock), daemon=True)
    pump.start()
    pumps.append(pump)


class _SignalInterruptError(Exception):
    """SIGTERM or SIGHUP reached the launcher: stop every task, as Ctrl-C (SIGINT) does."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received signal {signum}")
        self.signum = signum


class _StopSignals:
    """SIGTERM and SIGHUP (``timeout``, ``kill``, a closed terminal) interrupt the start and the
    wait for the chief as SIGINT does: the tasks run in sessions of their own, so nothing else
    would stop them. Outside that window (the cleanup) a signal is only noted, so the cleanup
    that stops the tasks is never cut short. Handlers are installed from the main thread only."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.interruptible = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.interruptible:
            self.interruptible = False
            raise _SignalInterruptError(signum)


def _stop(tasks: list[_Task]) -> list[str]:
    """Terminates tasks still running (SIGTERM, then SIGKILL after 5 s); returns their labels."""
    stopped = [t for t in tasks if t.process.poll() is None]
    for task in stopped:
        _signal(task, signal.SIGTERM)
    end = time.monotonic() + 5
    for task in stopped:
        try:
            task.process.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(task, signal.SIGKILL)
            task.process.wait()
    return [t.label for t in stopped]


def _signal(task: _Task, sig: int) -> None:
    try:
        os.killpg(task.process.pid, sig)
    except ProcessLookupError:
        pass


def _status(code: Optional[int]) -> str:
    if code is None:
        return "running"
    if code < 0:
        return f"signal {-code}"
    return str(code)
