"""The ``tensorgrid`` command: ``server`` runs one task, ``local`` runs a whole cluster on loopback,
``certs`` makes the TLS certificates of a cluster across machines, ``devices`` lists the devices a
server on this machine would expose, ``checkpoint convert`` writes a checkpoint in TensorFlow's format
or tensorgrid's."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    from tensorgrid.distributed.rpc import server as server_lib

# How often ``ps-standby --take-over-file`` reads its file, and how long it waits after a take
# over that failed (the address still taken) before it tries again.
TAKE_OVER_POLL_S = 0.25
TAKE_OVER_RETRY_S = 2.0


def _server(args: argparse.Namespace) -> int:
    from tensorgrid.distributed import cluster as cluster_lib
    from tensorgrid.distributed.rpc import server as server_lib

    # Stopped from outside (a drain, an eviction, a node shutdown) is not the end of
    # training: exit as a process killed by that signal would, 128 + its number, so the
    # operator retries it instead of recording a success. Handlers go in first: the
    # server listens (and can be signalled) before its constructor returns.
    stopped_by: list[int] = []
    running: list[server_lib.Server] = []

    def on_signal(signum: int, frame: object) -> None:
        stopped_by.append(signum)
        for task in running:
            task.request_stop(f"received signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.cluster:
        try:
            cluster = cluster_lib.ClusterSpec(json.loads(args.cluster))
        except json.JSONDecodeError as e:
            print(f"tensorgrid server: --cluster is not valid JSON: {e}", file=sys.stderr)
            return 2
        if args.job is None or args.task is None:
            print("tensorgrid server: --cluster needs --job and --task", file=sys.stderr)
            return 2
        job, task = args.job, args.task
    else:
        if not os.environ.get("TF_CONFIG"):
            print("tensorgrid server: set TF_CONFIG or pass --cluster, --job and --task", file=sys.stderr)
            return 2
        tf_config = cluster_lib.TFConfig.from_env()
        cluster = tf_config.cluster
        job = args.job or tf_config.task_type
        task = args.task if args.task is not None else tf_config.task_index
    try:
        server = server_lib.Server(cluster, job, task, metrics_port=args.metrics_port)
    except ValueError as e:  # a configuration error (cluster, job, task, TENSORGRID_DATA_PORT): no traceback
        print(f"tensorgrid server: {e}", file=sys.stderr)
        return 2

    running.append(server)
    if stopped_by:
        server.request_stop(f"received signal {stopped_by[0]}")
    server.wait_until_stopped()
    return 128 + stopped_by[0] if stopped_by else 0


def _ps_standby(args: argparse.Namespace) -> int:
    """Holds the live replica of one PS task's state until SIGTERM or SIGINT; on SIGUSR1 (or once
    ``--take-over-file`` names its PS) takes over the PS's address in TF_CONFIG's cluster as that
    PS, with the replica loaded, and serves as it until it stops (as ``tensorgrid server`` does).
    Started with the take-over file naming its PS already, it is that PS restarted (the process
    that took over ended; on Kubernetes the pod's container restarted) and starts as it at once."""
    from tensorgrid.distributed.rpc import replication_service

    try:
        standby_for = args.standby_for or replication_service.standby_task(os.environ)
        if args.take_over_file and replication_service.take_over_request(args.take_over_file) == standby_for:
            server = replication_service.come_back_as_promoted(
                standby_for, replication_service.promotion_cluster(os.environ), args.address)
            return _serve_promoted(server, [])
        rpc_server, store = replication_service.serve_standby(args.address, standby_for)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"tensorgrid ps-standby: {e}", file=sys.stderr)
        return 2
    woken = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        woken.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(signum, on_signal)
    next_look = 0.0  # when the take-over file is read next: at once, and a while after a failed take over
    refused: set[str] = set()  # tasks the file named that this standby cannot become (said once each)

    def told_to_take_over() -> bool:
        told = replication_service.take_over_request(args.take_over_file)
        if told and told != standby_for and told not in refused:
            refused.add(told)
            logging.getLogger("tensorgrid.replication").error(
                "The standby of %s is told to take over %r (%s): it can only become the PS whose replica it "
                "holds", standby_for, told, args.take_over_file)
        return told == standby_for

    while True:
        while not woken.wait(TAKE_OVER_POLL_S if args.take_over_file else 1.0):
            if args.take_over_file and time.monotonic() >= next_look and told_to_take_over():
                received.append(signal.SIGUSR1)
                woken.set()
        woken.clear()
        next_look = time.monotonic() + TAKE_OVER_RETRY_S
        if received[-1] != signal.SIGUSR1:
            rpc_server.stop(grace=1.0)
            return 128 + received[-1]
        try:
            server = replication_service.take_over(rpc_server, store, standby_for,
                                                   replication_service.promotion_cluster(os.environ), args.address)
        except ValueError as e:  # told to take over without the cluster: it stays a standby
            logging.getLogger("tensorgrid.replication").error("The standby of %s cannot take over: %s", standby_for, e)
            continue
        except replication_service.TakeOverError as e:  # it serves its replica again
            logging.getLogger("tensorgrid.replication").error("The standby of %s did not take over (%s): holding "
                                                              "its replica again", standby_for, e)
            rpc_server, store = replication_service.serve_standby(args.address, standby_for, store)
            continue
        break
    del store  # loaded into the server: the copy held goes
    return _serve_promoted(server, received)


def _serve_promoted(server: "server_lib.Server", received: list[int]) -> int:
    """Serves as the PS a standby became until it stops: 0 when training ended, 128 + the signal
    (SIGTERM, SIGINT) that stopped it. ``received``: the signals the standby had received."""
    def stop_server(signum: int, frame: object) -> None:
        received.append(signum)
        server.request_stop(f"received signal {signum}")

    signal.signal(signal.SIGTERM, stop_server)
    signal.signal(signal.SIGINT, stop_server)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # it took over already
    server.wait_until_stopped()
    return 128 + received[-1] if received and received[-1] != signal.SIGUSR1 else 0


def _local(args: argparse.Namespace, command: Sequence[str]) -> int:
    from tensorgrid import launcher

    spec = launcher.LocalClusterSpec(ps=args.ps, workers=args.workers, chief=args.chief, sync=args.sync,
                                     ps_server=args.ps_server, stop_timeout=args.stop_timeout,
                                     ps_standby=args.ps_standby, evaluator=args.evaluator)
    try:
        return launcher.run(spec, command)
    except ValueError as e:
        print(f"tensorgrid local: {e}", file=sys.stderr)
        return 2


def _certs(args: argparse.Namespace) -> int:
    import datetime

    from tensorgrid.distributed import cluster as cluster_lib
    from tensorgrid.distributed.rpc import certificates
    from tensorgrid.distributed.rpc import user_authority
    from tensorgrid.distributed.rpc.transport import tls

    def refuse(message: str) -> int:
        print(f"tensorgrid certs: {message}", file=sys.stderr)
        return 2

    try:
        if args.cluster is not None:
            try:
                spec = json.loads(args.cluster)
            except json.JSONDecodeError as e:
                return refuse(f"--cluster is not valid JSON ({e}): {args.cluster[:200]!r}")
            cluster = cluster_lib.ClusterSpec(spec)
            source = "--cluster"
        elif os.environ.get("TF_CONFIG", "").strip():
            cluster = cluster_lib.TFConfig.from_env().cluster
            source = "TF_CONFIG's cluster"
        else:
            return refuse('give the cluster: --cluster \'{"ps": ["host0:2222"], "worker": ["host1:2222"]}\', '
                          'or set TF_CONFIG')
        cluster_lib.check_addresses(cluster)  # a certificate names its task's host: every address must be host:port
    except (ValueError, TypeError) as e:
        return refuse(str(e))
    tasks = cluster.all_tasks()
    if not tasks:
        return refuse(f"{source} has no task: give at least one job with one 'host:port', e.g. "
                      '{"ps": ["host0:2222"], "worker": ["host1:2222"]}')
    if args.days <= 0:
        return refuse(f"--days {args.days}: the certificates must be valid for at least 1 day")
    out = os.path.abspath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        return refuse(f"--out {args.out!r} is a file, not a directory")
    if os.path.isdir(out) and os.listdir(out) and not args.force:
        return refuse(f"--out {args.out!r} is not empty: name a new directory, or pass --force to replace the files "
                      f"of the same names in it")
    os.makedirs(out, mode=0o700, exist_ok=True)
    made = certificates.write_cluster_directories(tasks, out, datetime.timedelta(days=args.days))
    print(f"Made a CA ({os.path.join(out, certificates.CA_FILE)}) and one certificate directory per task, valid for "
          f"{args.days} days; the CA's key was not kept (to change the cluster, run this again and copy every "
          f"directory anew).\nCopy each directory to its task's machine, readable by the task's user only, and "
          f"start the task with {tls.TLS_DIR_ENV} naming it:")
    for task in made:
        host = certificates.host_of(task.address)
        print(f"  /job:{task.job}/task:{task.index} at {task.address}:")
        if user_authority.is_this_machine(host):
            print(f"      on this machine: {tls.TLS_DIR_ENV}={task.directory}")
            continue
        there = f"tensorgrid-tls-{task.job}-{task.index}"
        remote = f"[{host}]" if ":" in host else host
        print(f"      scp -rp {task.directory} {remote}:{there}")
        print(f"      then, on {host}: {tls.TLS_DIR_ENV}=$HOME/{there}")
    return 0


def _devices(args: argparse.Namespace) -> int:
    from tensorgrid.kernels import cupy_backend

    print("/device:CPU:0  CPU")
    gpus, why = cupy_backend.probe()
    for gpu in gpus:
        print(f"/device:GPU:{gpu.index}  GPU  {gpu.name}, {gpu.memory_bytes / (1 << 30):.1f} GiB")
    if not gpus:
        print(f"no GPU: {why}")
        return 1 if args.require_gpu else 0
    return 0


def _checkpoint(args: argparse.Namespace) -> int:
    from tensorgrid.framework import errors
    from tensorgrid.train import checkpoint_conversion

    try:
        written = checkpoint_conversion.convert_checkpoint(args.source, args.destination, to=args.to)
    except (ValueError, TypeError, OSError, errors.OpError) as e:
        print(f"tensorgrid checkpoint convert: {e}", file=sys.stderr)
        return 1
    print(f"Wrote {written} in {args.to}'s format (from {args.source}); the 'checkpoint' file of its directory "
          "names it")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="tensorgrid", description=__doc__)
    parser.add_argument("--log-level", default=os.environ.get("TENSORGRID_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    server = sub.add_parser("server", help="run a ps or worker task (from TF_CONFIG or flags) until training ends")
    server.add_argument("--cluster", help='cluster JSON, e.g. \'{"ps": ["h:2222"], "worker": ["w:2222"]}\'')
    server.add_argument("--job", help="job name of this task (default: TF_CONFIG's task type)")
    server.add_argument("--task", type=int, help="task index (default: TF_CONFIG's task index)")
    server.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus metrics on this port (default: $TENSORGRID_METRICS_PORT, else off)")
    local = sub.add_parser("local", help="run a program as every task of a cluster on loopback: "
                                         "tensorgrid local --ps 1 --workers 2 -- python train.py")
    local.add_argument("--ps", type=int, default=1, help="number of parameter servers (default 1)")
    local.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    local.add_argument("--chief", action="store_true", help="add a separate chief task")
    local.add_argument("--sync", action="store_true", help="set TENSORGRID_SYNC=1 for synchronous training")
    local.add_argument("--ps-server", action="store_true",
                       help="run 'tensorgrid server' as the PS tasks instead of the program")
    local.add_argument("--ps-standby", action="store_true",
                       help="start a standby task per PS holding a live replica of its state: when a PS process "
                            "fails, its standby takes over its address and the next standby starts "
                            "(docs/fault-tolerance.md)")
    local.add_argument("--evaluator", action="store_true",
                       help="add an evaluator task (TF_CONFIG task type 'evaluator', not in the cluster) for "
                            "tf.estimator.train_and_evaluate")
    local.add_argument("--stop-timeout", type=float, default=30.0,
                       help="seconds other tasks (the evaluator too) get to finish after the chief exits (default 30)")
    standby = sub.add_parser("ps-standby", help="hold the live replica of a PS task's state (a standby PS)")
    standby.add_argument("--address", required=True, help="host:port to listen at (the PS's "
                                                          "TENSORGRID_PS_REPLICA_ADDRESS); once it took over, where "
                                                          "the next standby it pushes its replica to comes up")
    standby.add_argument("--take-over-file", default=None,
                         help="a file that, once it names the PS task (--standby-for), makes the standby take over "
                              "as SIGUSR1 does (the operator's annotation tensorgrid.io/take-over, in a downward API "
                              "volume); read every 0.25 s. Naming it already at the start: this process is that PS "
                              "restarted, and starts as it at once, loading its state from the next standby")
    standby.add_argument("--standby-for", default=None,
                         help="the PS task, e.g. /job:ps/replica:0/task:0 (default: $TENSORGRID_PS_STANDBY_FOR); on SIGUSR1 the standby takes over that PS's address "
                              "in TF_CONFIG's cluster as the PS, with the replica it holds loaded")
    certs = sub.add_parser("certs", help="make a CA and a TLS certificate directory per task of a cluster (from "
                                         "--cluster or TF_CONFIG), for TENSORGRID_TLS_DIR on each machine")
    certs.add_argument("--cluster", help='cluster JSON, e.g. \'{"ps": ["h0:2222"], "worker": ["h1:2222"]}\' '
                                         "(default: TF_CONFIG's cluster)")
    certs.add_argument("--out", required=True, help="directory to write into (made; must be empty unless --force)")
    certs.add_argument("--force", action="store_true", help="write into a non-empty --out, replacing files of the "
                                                            "same names")
    certs.add_argument("--days", type=int, default=365, help="how long the CA and certificates are valid (default 365)")
    devices = sub.add_parser("devices", help="list the devices a server on this machine would expose (CPU, and "
                                             "each GPU with its name and memory), or why there is no GPU")
    devices.add_argument("--require-gpu", action="store_true", help="exit 1 when there is no GPU")
    checkpoint = sub.add_parser("checkpoint", help="work on checkpoints: 'convert' between tensorgrid's format and "
                                                   "TensorFlow's")
    checkpoint_sub = checkpoint.add_subparsers(dest="checkpoint_command", required=True)
    convert = checkpoint_sub.add_parser("convert", help="write checkpoint SRC as checkpoint DST in another format "
                                                        "(docs/checkpoint-format.md)")
    convert.add_argument("source", metavar="SRC", help="a checkpoint's prefix (e.g. ckpt/model.ckpt-1000), either "
                                                      "format, or a directory: its latest checkpoint")
    convert.add_argument("destination", metavar="DST", help="the new checkpoint's prefix (e.g. tf/model.ckpt-1000)")
    convert.add_argument("--to", required=True, choices=["tensorflow", "tensorgrid"],
                         help="the format to write: tensorflow (a V2 bundle, P.index and P.data-00000-of-00001, "
                              "that TensorFlow's Saver.restore reads) or tensorgrid")
    args = parser.parse_args(argv)
    logging.getLogger("tensorgrid").setLevel(args.log_level.upper())
    if args.command == "server":
        return _server(args)
    if args.command == "ps-standby":
        return _ps_standby(args)
    if args.command == "devices":
        return _devices(args)
    if args.command == "certs":
        return _certs(args)
    if args.command == "checkpoint":
        return _checkpoint(args)
    return _local(args, command)


if __name__ == "__main__":
    sys.exit(main())
