"""The cluster layout: ``ClusterSpec`` and the ``TF_CONFIG`` environment variable.

A ClusterSpec maps job names (``ps``, ``worker``, ``chief``, ...) to task addresses,
as a list (dense indices) or a dict (sparse indices). ``TF_CONFIG`` is the
Kubeflow-compatible JSON the operator injects into every pod: the cluster, this
pod's task, and the environment.
"""

from __future__ import annotations

import json
import os
import re
import socket
from typing import Any, Mapping, Optional

from tensorgrid.v1 import cluster_pb2

_JOB_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


class ClusterSpec:
    """Job name -> {task index -> "host:port"} (``tf.train.ClusterSpec``), from a dict, another
    ClusterSpec or a ``ClusterDef`` message."""

    def __init__(self, cluster: Any) -> None:
        if isinstance(cluster, ClusterSpec):
            self._jobs: dict[str, dict[int, str]] = {j: dict(t) for j, t in cluster._jobs.items()}
            return
        if isinstance(cluster, cluster_pb2.ClusterDef):
            cluster = {job.name: dict(job.tasks) for job in cluster.job}
        if not isinstance(cluster, Mapping):
            raise TypeError(
                "ClusterSpec takes a dict of job name -> list of 'host:port' (or dict of index -> 'host:port') "
                f"or a ClusterDef, got {type(cluster).__name__}"
            )
        self._jobs = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str) or not _JOB_NAME.match(job):
                raise ValueError(f"Invalid job name {job!r}: use letters, digits, '_' and '-', starting with a letter")
            if isinstance(tasks, Mapping):
                entries = {}
                for index, address in tasks.items():
                    try:
                        i = int(index)
                    except (TypeError, ValueError):
                        raise ValueError(f"Task index {index!r} of job {job!r} is not an integer") from None
                    if i < 0:
                        raise ValueError(f"Task index {i} of job {job!r} must be >= 0")
                    entries[i] = _check_address(job, i, address)
            elif isinstance(tasks, (list, tuple)):
                entries = {i: _check_address(job, i, a) for i, a in enumerate(tasks)}
            else:
                raise TypeError(f"Tasks of job {job!r} must be a list or dict of addresses, got {tasks!r}")
            self._jobs[job] = dict(sorted(entries.items()))

    @property
    def jobs(self) -> list[str]:
        return list(self._jobs)

    def as_dict(self) -> dict[str, Any]:
        """Dense jobs as lists, sparse ones and jobs with no task as dicts (as TF returns them)."""
        result: dict[str, Any] = {}
        for job, tasks in self._jobs.items():
            if tasks and list(tasks) == list(range(len(tasks))):
                result[job] = list(tasks.values())
            else:
                result[job] = dict(tasks)
        return result

    def as_cluster_def(self) -> cluster_pb2.ClusterDef:
        """The cluster as a ``ClusterDef`` message (TensorFlow's field names, jobs sorted as TF's)."""
        return cluster_pb2.ClusterDef(job=[cluster_pb2.JobDef(name=job, tasks=self._jobs[job])
                                           for job in sorted(self._jobs)])

    def num_tasks(self, job_name: str) -> int:
        return len(self._tasks(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return list(self._tasks(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._tasks(job_name)
        try:
            return tasks[int(task_index)]
        except KeyError:
            raise ValueError(
                f"No task with index {task_index} in job {job_name!r}; its tasks are {sorted(tasks)}"
            ) from None

    def job_tasks(self, job_name: str) -> list[Optional[str]]:
        """Addresses indexed by task, with None for the gaps of a sparse job."""
        tasks = self._tasks(job_name)
        if not tasks:
            return []
        return [tasks.get(i) for i in range(max(tasks) + 1)]

    def _tasks(self, job_name: str) -> dict[int, str]:
        try:
            return self._jobs[job_name]
        except KeyError:
            raise ValueError(f"No such job in cluster: {job_name!r}; jobs are {self.jobs}") from None

    def all_tasks(self) -> list[tuple[str, int, str]]:
        return [(job, i, a) for job, tasks in self._jobs.items() for i, a in tasks.items()]

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    def __str__(self) -> str:
        """As TensorFlow prints it: jobs sorted by name."""
        jobs = self.as_dict()
        return "ClusterSpec({" + ", ".join(f"{job!r}: {jobs[job]!r}" for job in sorted(jobs)) + "})"

    __repr__ = __str__


def _check_address(job: str, index: int, address: Any) -> str:
    """A task's address as the spec keeps it: any string, as TensorFlow's ClusterSpec takes it (a
    ``tf.train.Server`` checks the cluster's addresses, ``address_problem``, when it is made)."""
    if not isinstance(address, str):
        raise TypeError(f"Address of /job:{job}/task:{index} must be a 'host:port' string, got {address!r}")
    return address


def address_problem(address: str) -> Optional[str]:
    """Why ``address`` is not ``host:port`` with a port in 0..65535, or None when it is."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        return (f"{address!r} is not 'host:port' with a port in 0..65535 (0: a free port, chosen when the "
                "server starts)")
    return None


def check_addresses(cluster: ClusterSpec) -> None:
    """Raises ValueError naming the first task whose address is not ``host:port``."""
    for job, index, address in cluster.all_tasks():
        problem = address_problem(address)
        if problem is not None:
            raise ValueError(f"Address of /job:{job}/task:{index}: {problem}")


def task_name(job: str, index: int) -> str:
    return f"/job:{job}/replica:0/task:{index}"


class TFConfig:
    """The parsed ``TF_CONFIG``: cluster, this task (type and index), environment."""

    def __init__(self, cluster: ClusterSpec, task_type: Optional[str], task_index: Optional[int],
                 environment: str = "", rpc_layer: Optional[str] = None) -> None:
        self.cluster = cluster
        self.task_type = task_type
        self.task_index = task_index
        self.environment = environment
        self.rpc_layer = rpc_layer
        """TF_CONFIG's ``rpc_layer`` (e.g. "grpc"), None when it names none."""

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "TFConfig":
        text = (environ if environ is not None else os.environ).get("TF_CONFIG", "")
        return cls.parse(text)

    @classmethod
    def parse(cls, text: str) -> "TFConfig":
        if not text.strip():
            return cls(ClusterSpec({}), None, None)
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG is not valid JSON ({e}): {text[:200]!r}") from None
        if not isinstance(config, dict):
            raise ValueError(f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got {text[:200]!r}")
        cluster = ClusterSpec(config.get("cluster") or {})
        check_addresses(cluster)
        task = config.get("task") or {}
        if not isinstance(task, dict):
            raise ValueError(f"TF_CONFIG 'task' must be an object like {{'type': 'worker', 'index': 0}}, got {task!r}")
        task_type = task.get("type")
        index = task.get("index")
        if index is not None:
            try:
                index = int(index)
            except (TypeError, ValueError):
                raise ValueError(f"TF_CONFIG task index must be an integer, got {index!r}") from None
        if task_type is not None and cluster and task_type not in cluster.jobs and task_type != "evaluator":
            raise ValueError(f"TF_CONFIG task type {task_type!r} is not a job of the cluster {cluster.jobs}")
        if task_type in (cluster.jobs if cluster else []) and index is not None:
            cluster.task_address(task_type, index)  # validates the index
        return cls(cluster, task_type, index, str(config.get("environment", "")),
                   str(config["rpc_layer"]) if config.get("rpc_layer") else None)


def chief_task(cluster: ClusterSpec) -> Optional[tuple[str, int]]:
    """The task that initialises and checkpoints: the ``chief`` (or ``master``) job, else worker 0."""
    for job in ("chief", "master"):
        if job in cluster.jobs and cluster.num_tasks(job):
            return job, cluster.task_indices(job)[0]
    if "worker" in cluster.jobs and 0 in cluster.task_indices("worker"):
        return "worker", 0
    return None


def training_tasks(cluster: ClusterSpec) -> list[tuple[str, int]]:
    """Tasks that run the training program (everything but ps and evaluator)."""
    return [(job, i) for job, i, _ in cluster.all_tasks() if job not in ("ps", "evaluator")]


_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "ip6-localhost"}


def tasks_on_this_host(cluster: ClusterSpec, own_address: str) -> int:
    """How many tasks of ``cluster`` listen on this machine (at least 1: this task).

    A task is local when its host is a loopback name or this machine's hostname, as
    in ``tensorgrid local`` and tests; in a Kubernetes pod every other task has its
    own address, so the answer is 1.
    """
    local_hosts = _LOOPBACK_HOSTS | {socket.gethostname(), socket.getfqdn()}
    local = {address for _, _, address in cluster.all_tasks()
             if address.rpartition(":")[0].lower() in local_hosts or address.rpartition(":")[0].startswith("127.")}
    local.add(own_address)
    return len(local)


INTRA_OP_THREADS_ENV = "TENSORGRID_INTRA_OP_THREADS"
"""BLAS threads of a task whose config sets none; the operator sets it from the pod's CPU."""


def intra_op_threads_from_environment() -> Optional[int]:
    """``$TENSORGRID_INTRA_OP_THREADS`` as a thread count, None where it is unset or empty."""
    configured = os.environ.get(INTRA_OP_THREADS_ENV, "").strip()
    if not configured:
        return None
    if not configured.isdigit() or int(configured) < 1:
        raise ValueError(f"{INTRA_OP_THREADS_ENV}={configured!r}: expected a whole number of threads >= 1")
    return int(configured)


def default_intra_op_threads(cluster: ClusterSpec, own_address: str) -> int:
    """Threads for one op (BLAS) when the config leaves it to the system:
    ``$TENSORGRID_INTRA_OP_THREADS`` where set, else the cores this process may use (its
    affinity, and its cgroup's CPU limit where one is set) shared out among the tasks of the
    cluster on this machine.

    numpy's OpenBLAS keeps its idle threads spinning for a while after each call;
    several tasks on one machine, each with a thread per core, then take the cores
    from each other (on 2 cores, 1 PS and 2 workers trained 3 times slower with 2
    BLAS threads per task than with 1; three pods of a job on one 2-core node, each with
    2 threads, trained 10 times slower, and a 64x784 matmul took 37 ms instead of 0.5 ms).
    """
    configured = intra_op_threads_from_environment()
    if configured is not None:
        return configured
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, limit)
    return max(1, cores // tasks_on_this_host(cluster, own_address))


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup") -> Optional[int]:
    """The CPU limit of this process's cgroup in whole cores (rounded up), or None when it
    has none: a container's ``resources.limits.cpu``, ``docker run --cpus``."""
    try:  # cgroup v2: "max 100000" or "<quota> <period>"
        with open(os.path.join(root, "cpu.max")) as f:
            quota, _, period = f.read().strip().partition(" ")
    except OSError:
        try:  # cgroup v1: a quota of -1 is no limit
            with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
                quota = f.read().strip()
            with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
                period = f.read().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no limit
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, -(-quota_us // period_us))
