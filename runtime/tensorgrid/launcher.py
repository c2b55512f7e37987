"""``tensorgrid local``: a cluster of processes on loopback, for development and demos.

Starts one process per task with its own ``TF_CONFIG`` (free ports on 127.0.0.1), and with
``--evaluator`` one more, outside the cluster (it serves nothing, so it gets no certificate),
streams every task's output with a ``[job:index]`` prefix, and when the chief exits
gives the other tasks a moment to finish, stops whatever is still running, and
exits with the chief's status. Ctrl-C, SIGTERM and SIGHUP stop every task at once
(the tasks run in sessions of their own, so no signal reaches them otherwise).

With ``--ps-standby`` each PS has a chain of standbys (``_PsStandbys``): when the process
serving as a PS fails while training runs, its standby takes over the PS's address, and
the next standby starts where that one served, so each later loss of the PS is survived too.

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
from typing import IO, Any, Callable, Optional, Sequence

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
    def __init__(self, job: str, index: int, process: subprocess.Popen[bytes], generation: int = 1,
                 on_line: Optional[Callable[["_Task", str], None]] = None) -> None:
        self.job = job
        self.index = index
        self.process = process
        self.generation = generation
        """1 for a task's first process; a PS's next standbys count on: 2, 3, ..."""
        self.on_line = on_line
        """Called with each line of the process's output, after it is written out."""
        self.promoted = False
        """A standby that took over its PS: it ends with training, as the PS does, and is reported."""

    @property
    def label(self) -> str:
        return f"{self.job}:{self.index}" + (f"#{self.generation}" if self.generation > 1 else "")


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
        if task.on_line is not None:
            task.on_line(task, line)


def run(spec: LocalClusterSpec, command: Sequence[str], out: IO[str] = sys.stdout) -> int:
    """Runs ``command`` as every task of a local cluster; returns the chief's exit status."""
    if not command:
        raise ValueError("tensorgrid local needs a command after '--', e.g. -- python train.py")
    if spec.workers < 0 or spec.ps < 0 or (spec.workers == 0 and not spec.chief):
        raise ValueError(f"A cluster needs at least one worker or a chief, got --ps {spec.ps} --workers {spec.workers}")
    cluster = cluster_for(spec)
    insecure = not os.environ.get(tls.TLS_DIR_ENV) and os.environ.get(tls.INSECURE_ENV) == "1"
    with tempfile.TemporaryDirectory(prefix="tensorgrid-local-") as run_root:
        task_tls_dirs = {} if insecure else _task_certificates(cluster, run_root)
        return _run_tasks(spec, cluster, task_tls_dirs, command, out, run_root)


def _task_certificates(cluster: dict[str, list[str]], root: str) -> dict[tuple[str, int], str]:
    """A fresh CA for this run and a certificate per task under ``root``: each task's ``TENSORGRID_TLS_DIR``."""
    authority = certificates.new_authority("tensorgrid local CA")
    return {(job, index): certificates.write_task_directory(os.path.join(root, f"{job}-{index}"), authority,
                                                            f"tensorgrid local {job}:{index}")
            for job, addresses in cluster.items() for index in range(len(addresses))}


def _run_tasks(spec: LocalClusterSpec, cluster: dict[str, list[str]], task_tls_dirs: dict[tuple[str, int], str],
               command: Sequence[str], out: IO[str], run_root: str) -> int:
    color = out.isatty() and not os.environ.get("NO_COLOR")
    lock = threading.Lock()
    tasks: list[_Task] = []
    pumps: list[threading.Thread] = []
    chief_job = "chief" if spec.chief else "worker"
    with lock:
        out.write(f"tensorgrid local: cluster {json.dumps(cluster)}\n")
    started = time.monotonic()
    interrupted = False
    standbys: Optional[_PsStandbys] = None
    with _StopSignals() as stop_signals:
        try:
            stop_signals.interruptible = True
            standbys = _start_tasks(spec, cluster, task_tls_dirs, command, out, color, lock, tasks, pumps, run_root)
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
            if standbys is not None:
                standbys.close()  # before the tasks are stopped: a PS stopped at the end is no loss
        return _finish(spec, tasks, pumps, chief_status, interrupted, started, out, lock)


def _finish(spec: LocalClusterSpec, tasks: list[_Task], pumps: list[threading.Thread], chief_status: int,
            interrupted: bool, started: float, out: IO[str], lock: threading.Lock) -> int:
    """Gives the other tasks ``stop_timeout`` to end (none after an interruption), stops the rest,
    and reports every task's status; returns the chief's."""
    deadline = time.monotonic() + (0 if interrupted else spec.stop_timeout)
    standbys = [task for task in tasks if task.job == STANDBY_JOB and not task.promoted]
    tasks = [task for task in tasks if task not in standbys]
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
                 pumps: list[threading.Thread], run_root: str) -> Optional["_PsStandbys"]:
    """Starts every task's process and the thread streaming its output, appending each to
    ``tasks`` and ``pumps`` as it starts (a signal during the start stops those already running);
    with ``--ps-standby`` the standbys first, and returns what watches them."""
    def task_env(job: str, index: int) -> dict[str, str]:
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": index},
                                       "environment": "cloud"})
        env["PYTHONUNBUFFERED"] = "1"
        env["TENSORGRID_SYNC"] = "1" if spec.sync else "0"
        if task_tls_dirs:
            env[tls.TLS_DIR_ENV] = task_tls_dirs[(job, index)]
        return env

    def start(job: str, index: int, argv: Sequence[str], env: dict[str, str], generation: int = 1,
              on_line: Optional[Callable[[_Task, str], None]] = None) -> _Task:
        return _start_task(job, index, argv, env, out, color, lock, tasks, pumps, generation, on_line)

    def say(message: str) -> None:
        with lock:
            out.write(f"tensorgrid local: {message}\n")
            out.flush()

    standbys = None
    if spec.ps_standby:
        take_over_dir = os.path.join(run_root, "take-over")
        os.makedirs(take_over_dir)
        standbys = _PsStandbys(len(cluster.get("ps", [])), cluster, task_env, take_over_dir, start, say)
    for job, addresses in cluster.items():
        for index in range(len(addresses)):
            env = task_env(job, index)
            if job == "ps" and standbys is not None:
                env[replication.REPLICA_ADDRESS_ENV] = standbys.address(index)
            argv = list(command)
            if job == "ps" and spec.ps_server:
                argv = [sys.executable, "-m", "tensorgrid", "server"]
            start(job, index, argv, env)
    if spec.evaluator:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": EVALUATOR_JOB, "index": 0},
                                       "environment": "cloud"})
        start(EVALUATOR_JOB, 0, list(command), env)
    say("pids " + ", ".join(f"{task.label}={task.process.pid}" for task in tasks))
    if standbys is not None:
        standbys.watch([task for task in tasks if task.job == "ps"])
    return standbys


def _start_task(job: str, index: int, argv: Sequence[str], env: dict[str, str], out: IO[str], color: bool,
                lock: threading.Lock, tasks: list[_Task], pumps: list[threading.Thread], generation: int = 1,
                on_line: Optional[Callable[[_Task, str], None]] = None) -> _Task:
    process = subprocess.Popen(list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    task = _Task(job, index, process, generation, on_line)
    tasks.append(task)
    pump = threading.Thread(target=_pump, args=(task, out, color, lock), daemon=True)
    pump.start()
    pumps.append(pump)
    return task


@dataclasses.dataclass
class _PsChain:
    """One PS's serving process and its standby, as ``_PsStandbys`` follows them."""

    index: int
    address: str
    """Where each of its standbys listens: the PS's ``TENSORGRID_PS_REPLICA_ADDRESS``, and where the
    PS a standby became pushes its replica."""
    serving: Optional[_Task] = None
    standby: Optional[_Task] = None
    standbys_started: int = 0
    told: bool = False
    """The standby's take-over file names the PS: it takes over as soon as it can."""
    took_over: bool = False
    """The standby said it took over (read from its output): the next standby is due."""
    lost_said: bool = False


class _PsStandbys:
    """The standbys of ``--ps-standby``, one per PS at an address of its own. When the process
    serving as a PS exits with a failure (killed, crashed; 0 is training's end) its standby is told
    to take over (its ``--take-over-file`` names the PS); once the standby says it took over (on
    that, or on a SIGUSR1 sent by hand), the next standby starts at the same address, where the
    promoted PS pushes its replica, so the next loss of that PS is survived too, and so on."""

    POLL_S = 0.1

    def __init__(self, ps_count: int, cluster: dict[str, list[str]], task_env: Callable[[str, int], dict[str, str]],
                 take_over_dir: str, start: Callable[..., _Task], say: Callable[[str], None]) -> None:
        self._cluster = cluster
        self._task_env = task_env
        self._take_over_dir = take_over_dir
        self._start = start
        self._say = say
        self._chains = [_PsChain(index, f"localhost:{port}") for index, port in enumerate(ports.free_ports(ps_count))]
        self._closed = threading.Event()
        self._thread: Optional[threading.Thread] = None
        for chain in self._chains:
            self._start_standby(chain)

    def address(self, index: int) -> str:
        return self._chains[index].address

    def watch(self, ps_tasks: list[_Task]) -> None:
        """Follows the PS tasks (started after the standbys) until ``close``."""
        for task in ps_tasks:
            self._chains[task.index].serving = task
        self._thread = threading.Thread(target=self._watch, daemon=True, name="ps-standbys")
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join()

    def _take_over_file(self, chain: _PsChain) -> str:
        return os.path.join(self._take_over_dir, f"ps-{chain.index}-standby-{chain.standbys_started}")

    def _start_standby(self, chain: _PsChain) -> _Task:
        chain.standbys_started += 1
        env = self._task_env("ps", chain.index)  # the PS's TF_CONFIG and certificate: it may become that PS
        env.pop(replication.REPLICA_ADDRESS_ENV, None)  # once promoted, it pushes to the next standby at its address
        env[replication.STANDBY_FOR_ENV] = cluster_lib.task_name("ps", chain.index)
        argv = [sys.executable, "-m", "tensorgrid", "ps-standby", "--address", chain.address,
                "--take-over-file", self._take_over_file(chain)]
        chain.standby = self._start(STANDBY_JOB, chain.index, argv, env, chain.standbys_started, self._on_line)
        chain.told = chain.took_over = False
        return chain.standby

    def _on_line(self, task: _Task, line: str) -> None:
        chain = self._chains[task.index]
        if task is chain.standby and replication.TOOK_OVER in line:
            chain.took_over = True

    def _watch(self) -> None:
        while not self._closed.wait(self.POLL_S):
            for chain in self._chains:
                self._follow(chain)

    def _follow(self, chain: _PsChain) -> None:
        ps = f"ps:{chain.index} ({self._cluster['ps'][chain.index]})"
        if chain.took_over and chain.standby is not None:
            promoted = chain.standby
            promoted.promoted = True
            chain.serving = promoted
            following = self._start_standby(chain)
            self._say(f"the standby {promoted.label} (pid {promoted.process.pid}) took over as {ps}; started the next "
                      f"standby {following.label} (pid {following.process.pid}) at {chain.address}, which the new PS "
                      f"pushes its replica to: a next loss of ps:{chain.index} is survived too")
            return
        status = None if chain.serving is None else chain.serving.process.poll()
        if chain.told or chain.serving is None or status is None or status == 0:
            return
        if chain.standby is None or chain.standby.process.poll() is not None:
            if not chain.lost_said:
                chain.lost_said = True
                self._say(f"{chain.serving.label} exited ({_status(status)}) and no standby of {ps} runs: nothing "
                          f"takes over (the workers wait for a PS at its address)")
            return
        path = self._take_over_file(chain)
        with open(path + ".new", "w", encoding="utf-8") as f:
            f.write(cluster_lib.task_name("ps", chain.index))
        os.replace(path + ".new", path)  # the standby never reads half a name
        chain.told = True
        self._say(f"{chain.serving.label} (pid {chain.serving.process.pid}) exited ({_status(status)}): its standby "
                  f"{chain.standby.label} (pid {chain.standby.process.pid}) takes over as {ps}")


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
