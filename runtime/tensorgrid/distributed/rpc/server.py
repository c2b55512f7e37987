"""``tf.train.Server``: one task of the cluster, hosting a Master and a Worker over gRPC.

Start-up in any order: a server starts listening at once and reaches its peers
lazily, waiting with backoff for those that are not up yet. Shutdown without
``join()`` hanging forever: every training task reports when it finishes (when its
MonitoredTrainingSession ends, or at process exit), and a parameter server's
``join()`` returns once every training task has finished, or a grace period after
the chief finished (so a worker that died cannot keep the PS alive).

A worker may join a running asynchronous job with a cluster spec listing more workers than
this task's (the operator's ``kubectl scale``): its master's registrations name the step's
tasks with their addresses (``RegisterGraphRequest.peer_addresses``), and this task adds the
workers its own spec lacks (``learn_peers``), to push them tensors and to wait for their end.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from typing import TYPE_CHECKING, Any, Mapping, Optional

from tensorgrid.distributed.rpc import session_targets
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import limits as limits_lib
from tensorgrid.distributed import master as master_lib
from tensorgrid.distributed import shard_queue
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.distributed import replication
from tensorgrid.distributed import worker as worker_lib
from tensorgrid.distributed import worker_interface
from tensorgrid.framework import device as device_lib
from tensorgrid.framework import errors
from tensorgrid.kernels import numpy_backend
from tensorgrid.v1 import cluster_pb2
from tensorgrid.v1 import config_pb2

if TYPE_CHECKING:
    from tensorgrid.distributed.rpc import clients
    from tensorgrid.distributed.rpc import services

log = logging.getLogger("tensorgrid.server")

DEFAULT_PS_GRACE_SECONDS = 60.0


class Server:
    """A task's in-process server (``tf.train.Server``)."""

    def __init__(self, server_or_cluster_def: Any, job_name: Optional[str] = None, task_index: Optional[int] = None,
                 protocol: Optional[str] = None, config: Any = None, start: bool = True,
                 metrics_port: Optional[int] = None) -> None:
        port_override = 0
        if isinstance(server_or_cluster_def, cluster_pb2.ServerDef):
            # As TensorFlow: the arguments given override the ServerDef's fields.
            given = server_or_cluster_def
            port_override = given.port
            server_or_cluster_def = given.cluster
            job_name = job_name if job_name is not None else (given.job_name or None)
            task_index = task_index if task_index is not None else given.task_index
            protocol = protocol if protocol is not None else (given.protocol or None)
            if config is None and given.HasField("default_session_config"):
                config = given.default_session_config
        if protocol not in (None, "grpc"):
            raise ValueError(f"Unsupported protocol {protocol!r}; tensorgrid speaks 'grpc'")
        cluster = cluster_lib.ClusterSpec(server_or_cluster_def)
        if not cluster:
            raise ValueError("The cluster of a Server must have at least one job")
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError(f"job_name must be given when the cluster has several jobs: {cluster.jobs}")
            job_name = cluster.jobs[0]
        if job_name not in cluster.jobs:
            # TensorFlow's class and words (its server library reports these as internal errors).
            raise errors.InternalError(None, None, f'Job "{job_name}" was not defined in cluster; '
                                                   f"its jobs are {cluster.jobs}")
        if task_index is None:
            indices = cluster.task_indices(job_name)
            if len(indices) != 1:
                raise ValueError(f"task_index must be given: job {job_name!r} has tasks {indices}")
            task_index = indices[0]
        if int(task_index) not in cluster.task_indices(job_name):
            raise errors.InternalError(None, None, f'Task {task_index} was not defined in job "{job_name}"; '
                                                   f"its tasks are {cluster.task_indices(job_name)}")
        address = cluster.task_address(job_name, task_index)
        _check_cluster_addresses(cluster, job_name, int(task_index))
        self.cluster = cluster
        self.job_name = job_name
        self.task_index = int(task_index)
        self.task = cluster_lib.task_name(job_name, self.task_index)
        self.address = address
        self._port_override = port_override
        self._config = config
        self._metrics_port = metrics_port
        self.limits = limits_lib.ServerLimits.from_env()
        """Resource bounds of this task's servers (docs/limits.md, ``TENSORGRID_*`` variables)."""
        self.worker = worker_lib.Worker(self.task, peer=self._peer, limits=self.limits, learn_peers=self.learn_peers)
        self.master = master_lib.Master(device_lib.DeviceSpec(job_name, 0, self.task_index), cluster,
                                        worker_for=self._peer, limits=self.limits)
        self.shards = shard_queue.ShardService()
        """The data sets of ``dynamic_shards`` this task hands out (task 0's only: ``shard_calls.host_task``)."""
        self.replica_store = replication.ReplicaStore(self.worker.incarnation)
        """Replicas of other tasks' state this task holds (the next PS's, in the ring)."""
        self.replication: Optional[replication_service.PrimaryReplication] = None
        """This PS's own replica on another task (None: it has none)."""
        self.promotion: Optional[replication.Promotion] = None
        """Set before ``start()`` by a standby taking over this PS (``replication_service.take_over``)."""
        self._peers: dict[str, clients.WorkerClient] = {}
        self._peers_lock = threading.Lock()
        self._joined_workers: dict[int, str] = {}
        """Workers outside this task's cluster spec that joined the running job: address by index."""
        self._moved_tasks: dict[str, str] = {}
        """Tasks of the cluster spec started again at another address (``follow_moved_task``):
        the address dialled for them now, by task name."""
        self._finished_tasks: set[str] = set()
        self._stop_event = threading.Event()
        self._grace_timer: Optional[threading.Timer] = None
        self._started = False
        self._serving: Optional[services.Serving] = None
        self._reported_finished = False
        self._joined = False
        self.port = 0
        self.stop_reason = ""
        if start:
            self.start()

    # ------------------------------------------------------------------ lifecycle
    @property
    def target(self) -> str:
        """``grpc://<host in the cluster spec>:<port listened on>`` (the port chosen when the spec said 0)."""
        return f"grpc://{self.address.rpartition(':')[0]}:{self.port}"

    @property
    def intra_op_threads(self) -> int:
        """BLAS threads of this task: the config's ``intra_op_parallelism_threads``, else
        this machine's cores shared among the cluster's tasks on it."""
        configured = int(getattr(self._config, "intra_op_parallelism_threads", 0) or 0)
        return configured or cluster_lib.default_intra_op_threads(self.cluster, self.address)

    @property
    def server_def(self) -> cluster_pb2.ServerDef:
        """What this server was started with, as a ``ServerDef`` message (TensorFlow's field names)."""
        config = self._config
        session_config = None
        if config is not None:
            session_config = config_pb2.SessionConfig(
                device_filters=list(getattr(config, "device_filters", []) or []),
                operation_timeout_in_ms=int(getattr(config, "operation_timeout_in_ms", 0) or 0),
                allow_soft_placement=bool(getattr(config, "allow_soft_placement", False)),
                log_device_placement=bool(getattr(config, "log_device_placement", False)),
                isolate_session_state=bool(getattr(config, "isolate_session_state", False)))
        return cluster_pb2.ServerDef(cluster=self.cluster.as_cluster_def(), job_name=self.job_name,
                                     task_index=self.task_index, protocol="grpc",
                                     default_session_config=session_config)

    def start(self) -> None:
        if self._started:
            return
        from tensorgrid.distributed.rpc import services
        from tensorgrid.distributed.rpc import user_authority

        # Started by hand on this machine, with no certificates given: the user's CA.
        user_authority.ensure_for([address for _, _, address in self.cluster.all_tasks()])
        port = self._port_override or int(self.address.rsplit(":", 1)[1])
        numpy_backend.limit_threads(self.intra_op_threads)
        numpy_backend.keep_freed_memory()
        # Before serving: a restarted PS runs no step until its replica is loaded.
        self.replication = replication_service.start_for(self)
        try:
            self._serving = services.serve(self, port)
        except BaseException:
            if self.replication is not None:
                self.replication.close()
            raise
        self.port = self._serving.port
        self._started = True
        session_targets.register_server(self)
        if self._metrics_port is not None or os.environ.get("TENSORGRID_METRICS_PORT"):
            from tensorgrid import monitoring

            monitoring.serve(self._metrics_port if self._metrics_port is not None
                          else int(os.environ["TENSORGRID_METRICS_PORT"]), self, ports.listen_host(self.address))
        _at_exit(self._exit)
        _stop_on_sigterm_as_pid_1()
        watch = self._serving.expiry_watch
        log.info("Started server for %s at %s (incarnation %016x%s)", self.task, self.address, self.worker.incarnation,
                 "" if watch is None else f"; TLS certificates valid until {watch.not_after:%Y-%m-%d %H:%M} UTC")

    def _exit(self) -> None:
        """At interpreter exit: a training task reports it finished, then the server stops.

        Not when a signal ends the process (a deleted or evicted pod): its training did not
        finish, and a PS told so would stop before the task's replacement arrives.
        """
        try:
            if cluster_lib.chief_task(self.cluster) == (self.job_name, self.task_index):
                from tensorgrid import monitoring

                monitoring.write_final_figures()  # the job's last step, rate and loss, for the operator
            if _stopping_signal:
                self.stop_reason = f"received signal {_stopping_signal[0]}"
            else:
                self.report_training_finished()
        finally:
            self.stop()

    def join(self) -> None:
        """Serves until this task is told to stop (a PS: until training has finished), then ends the
        process with status 0: TF1's ``join()`` never returns, so TF1 programs put the worker's code
        right after a PS's ``server.join()``, and a PS must not fall through into it. The exit is a
        ``SystemExit(0)``, so the program's ``finally`` blocks and ``atexit`` handlers run. Called
        from a thread other than the main one (which cannot end the process), it returns."""
        self.wait_until_stopped()
        if threading.current_thread() is threading.main_thread():
            log.info("%s stopped%s: exiting with status 0 (join() never returns, as in TF1)", self.task,
                     f" ({self.stop_reason})" if self.stop_reason else "")
            raise SystemExit(0)

    def wait_until_stopped(self) -> None:
        """Blocks until this task is told to stop, then stops its servers and returns."""
        self._joined = True
        while not self._stop_event.wait(1.0):
            pass
        self.stop()

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._stop_event.set()
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        session_targets.unregister_server(self)
        if self.replication is not None:
            self.replication.close()
        self.worker.close()
        self.master.close()
        if self._serving is not None:
            self._serving.stop(grace=1.0)
        log.info("Stopped server for %s%s", self.task, f": {self.stop_reason}" if self.stop_reason else "")

    def request_stop(self, reason: str) -> None:
        self.stop_reason = reason
        self._stop_event.set()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> "Server":
        """A single-task server on a free loopback port. Without ``TENSORGRID_TLS_DIR`` (and
        without ``TENSORGRID_INSECURE=1``) it speaks mutual TLS with credentials this process
        makes for itself: its clients are in this process, as TensorFlow's are."""
        from tensorgrid.distributed.rpc import certificates, ports

        certificates.ensure_single_process_credentials()
        return Server({"localhost": [f"localhost:{ports.free_ports(1)[0]}"]}, protocol="grpc", config=config,
                      start=start)

    @classmethod
    def from_env(cls, config: Any = None, start: bool = True) -> "Server":
        """The server of this task, from ``TF_CONFIG`` (as the operator injects it)."""
        tf_config = cluster_lib.TFConfig.from_env()
        if not tf_config.cluster:
            raise ValueError("TF_CONFIG is not set or has no cluster; it must look like "
                             '{"cluster": {"ps": ["host:2222"], "worker": [...]}, "task": {"type": "worker", "index": 0}}')
        if tf_config.task_type is None or tf_config.task_index is None:
            raise ValueError(f"TF_CONFIG has no task type and index: {os.environ.get('TF_CONFIG')!r}")
        return cls(tf_config.cluster, tf_config.task_type, tf_config.task_index, config=config, start=start)

    # ------------------------------------------------------------------ peers
    def _peer(self, task: str) -> worker_interface.WorkerInterface:
        """The worker of ``task``: this task's own, or a client of a remote one."""
        if task == self.task:
            return self.worker
        return self._client(task)

    def _client(self, task: str) -> clients.WorkerClient:
        with self._peers_lock:
            client = self._peers.get(task)
            if client is None:
                spec = device_lib.DeviceSpec.from_string(task)
                joined = self._joined_workers.get(spec.task or 0) if spec.job == "worker" else None
                address = self._moved_tasks.get(task) or joined or self.cluster.task_address(spec.job or "",
                                                                                             spec.task or 0)
                from tensorgrid.distributed.rpc import clients

                client = clients.WorkerClient(address, task)
                self._peers[task] = client
            return client

    def learn_peers(self, addresses: Mapping[str, str], registering_task: str = "",
                    registering_incarnation: int = 0) -> None:
        """Adds the workers of ``addresses`` (task name -> ``host:port``, a registering master's)
        that this task's cluster spec lacks: workers that joined the running job. A task of
        another job missing from the spec is refused (InvalidArgumentError naming it): only
        workers join a running job; for the tasks the spec has, the spec's address stands,
        but for the registering task itself, which says where it is now
        (``follow_moved_task``)."""
        for task, address in addresses.items():
            spec = device_lib.DeviceSpec.from_string(task)
            job, index = spec.job or "", spec.task or 0
            if job in self.cluster.jobs and index in self.cluster.task_indices(job):
                if task == registering_task and task != self.task and registering_incarnation:
                    self.follow_moved_task(task, address, registering_incarnation)
                continue
            if job != "worker":
                raise errors.InvalidArgumentError(
                    None, None, f"RegisterGraph: the step names {task} at {address}, which the cluster spec of "
                    f"{self.task} does not have; only workers may join a running job (its jobs: "
                    f"{', '.join(self.cluster.jobs)})")
            problem = cluster_lib.address_problem(address)
            if problem is not None:
                raise errors.InvalidArgumentError(None, None, f"RegisterGraph: the address of {task}: {problem}")
            with self._peers_lock:
                known = self._joined_workers.get(index)
                if known == address:
                    continue
                self._joined_workers[index] = address
                self._peers.pop(task, None)  # a worker that joined again elsewhere is dialled there
            log.info("%s joined the running job at %s (it is not in this task's cluster spec)", task, address)

    def follow_moved_task(self, task: str, address: str, incarnation: int) -> None:
        """Dials ``task`` at ``address`` from now on, when that is not where this task dials
        it and a GetStatus there answers with ``incarnation``: the task was started again
        elsewhere with its cluster spec updated (a rescheduled pod addressed by IP, a
        task moved by hand), while its old address may still lead to the process it
        replaced, frozen with its port open, which would take this task's calls and never
        answer. The client of the old address is closed: its calls in flight end
        (gRPC's at once, a data-channel call at its next reply probe) and its idle pooled
        connections are closed. An address that does not answer as ``incarnation`` is
        not followed (logged): a cluster spec naming the task otherwise (``localhost``)
        does not take it away from where it is reached."""
        with self._peers_lock:
            spec = device_lib.DeviceSpec.from_string(task)
            dialled = self._moved_tasks.get(task) or self.cluster.task_address(spec.job or "", spec.task or 0)
        if address == dialled or cluster_lib.address_problem(address) is not None:
            return
        from tensorgrid.distributed.rpc import clients

        moved = clients.WorkerClient(address, task)
        try:
            answered = moved.incarnation_quick()
        except errors.OpError as e:
            answered, why = 0, f"{type(e).__name__}: {e.message}"
        else:
            why = "" if answered == incarnation else f"another process answers there (incarnation {answered:016x})"
        if why:
            moved.close()
            log.info("%s registered from %s (incarnation %016x) but is still dialled at %s: %s", task, address,
                     incarnation, dialled, why)
            return
        replaced: Optional[clients.WorkerClient] = None
        with self._peers_lock:
            followed = self._moved_tasks.get(task) == address  # by a registration beside this one
            if not followed:
                self._moved_tasks[task] = address
                replaced = self._peers.get(task)
                self._peers[task] = moved
        if followed:
            moved.close()
            return
        if replaced is not None:
            replaced.close()
        log.info("%s now runs at %s (incarnation %016x), no longer at %s: its calls go there", task, address,
                 incarnation, dialled)

    def training_task_names(self) -> set[str]:
        """The training tasks of the cluster spec, and the workers that joined the running job."""
        with self._peers_lock:
            joined = {cluster_lib.task_name("worker", index) for index in self._joined_workers}
        return {cluster_lib.task_name(j, i) for j, i in cluster_lib.training_tasks(self.cluster)} | joined

    def unanswering_training_tasks(self) -> dict[str, str]:
        """The cluster's other training tasks that do not answer GetStatus now, each
        with the reason (for reports of missing replicas)."""
        unanswering = {}
        for job, index in cluster_lib.training_tasks(self.cluster):
            task = cluster_lib.task_name(job, index)
            if task != self.task:
                try:
                    self._client(task).incarnation_quick()
                except errors.OpError as e:
                    unanswering[task] = e.message
        return unanswering

    # ------------------------------------------------------------------ end of training
    def report_training_finished(self) -> None:
        """Tells every other task that this task's training is over (once).

        Parameter servers count these reports; workers that only serve (in-graph
        replication, blocked in ``join()``) stop when the chief's report arrives.
        """
        if self._reported_finished or self.job_name in ("ps", "evaluator"):
            return
        self._reported_finished = True
        is_chief = cluster_lib.chief_task(self.cluster) == (self.job_name, self.task_index)
        others = [cluster_lib.task_name(j, i) for j, i, _ in self.cluster.all_tasks()
                  if (j, i) != (self.job_name, self.task_index) and j != "evaluator"]
        # Serving workers first, so that they report to the PS before it counts.
        for task in sorted(others, key=lambda t: t.startswith("/job:ps")):
            try:
                self._client(task).task_finished(self.task, is_chief, timeout=5.0)
            except Exception as e:  # noqa: BLE001 - the task may already be gone
                log.debug("could not tell %s that %s finished: %s", task, self.task, e)

    def on_task_finished(self, task: str, is_chief: bool) -> None:
        """A training task finished; a PS stops when all have, or a grace period after the chief.

        A worker blocked in ``join()`` (it only serves, as in in-graph replication)
        stops when the chief finishes.
        """
        if self.job_name != "ps":
            if self._joined and is_chief:
                self.request_stop(f"the chief ({task}) finished")
            return
        self._finished_tasks.add(task)
        expected = self.training_task_names()
        remaining = expected - self._finished_tasks
        if not remaining:
            self.request_stop("every training task has finished")
            return
        log.info("%s finished; waiting for %s", task, ", ".join(sorted(remaining)))
        if is_chief and self._grace_timer is None:
            grace = float(os.environ.get("TENSORGRID_PS_GRACE_SECONDS", DEFAULT_PS_GRACE_SECONDS))
            self._grace_timer = threading.Timer(
                grace, self.request_stop, args=(f"the chief finished {grace:.0f} s ago; not waiting for "
                                                f"{', '.join(sorted(expected - self._finished_tasks))}",))
            self._grace_timer.daemon = True
            self._grace_timer.start()

    def __repr__(self) -> str:
        return f"<tensorgrid Server {self.task} at {self.address}>"


def _check_cluster_addresses(cluster: cluster_lib.ClusterSpec, job_name: str, task_index: int) -> None:
    """Every address of the cluster must be ``host:port``, as TensorFlow checks when a server is made
    (InvalidArgumentError, its words first)."""
    for job, index, address in cluster.all_tasks():
        problem = cluster_lib.address_problem(address)
        if problem is None:
            continue
        if (job, index) == (job_name, task_index):
            raise errors.InvalidArgumentError(
                None, None, f'Could not parse port for local server from "{address}": this task\'s address '
                            f"(/job:{job}/task:{index}) {problem}")
        raise errors.InvalidArgumentError(
            None, None, f'Could not interpret "{address}" as a host-port pair: the address of /job:{job}/task:{index} '
                        f"{problem}")


def _at_exit(callback: Any) -> None:
    """Runs ``callback`` when the interpreter exits, before thread pools refuse new work.

    ``concurrent.futures`` stops its executors (gRPC's among them) from a
    ``threading`` exit hook, which runs before ``atexit`` handlers; a server must
    still answer and send RPCs while it reports the end of training, so it hooks in
    at the same stage when it can.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(callback)
    else:
        atexit.register(callback)


# The signal that is ending this process, once the handler below received one.
_stopping_signal: list[int] = []


def _stop_on_sigterm_as_pid_1() -> None:
    """Make SIGTERM end this process when it is a container's first process.

    The kernel ignores a signal whose action is the default for the first process of a PID
    namespace. A training program started as a pod's command is that process, so without
    a handler `kubectl delete`, a drain or an eviction waits the whole grace period and then
    SIGKILLs it. The handler raises SystemExit(128 + SIGTERM) in the main thread, so
    ``finally`` blocks and the at-exit report run and the exit code says "stopped by a
    signal" (143), as for any other process. A program with its own handler keeps it.
    """
    if os.getpid() != 1 or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def exit_on_sigterm(signum: int, frame: object) -> None:
        log.info("received signal %d: exiting", signum)
        _stopping_signal.append(signum)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_on_sigterm)
