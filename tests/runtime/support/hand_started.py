"""Tasks started by hand, as TF1 tutorials start them: each a plain ``python`` program that
makes its ``tf.train.Server(cluster, job_name=..., task_index=...)``, with no ``tensorgrid
local`` and no operator. For the tests of TLS without set-up (``user_authority``) and of
``tensorgrid certs``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Mapping, Optional

import cluster_processes
from tensorgrid.distributed.rpc.transport import tls

PS_PROGRAM = """
import json, sys
import tensorgrid as tf
cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.train.Server(cluster, job_name="ps", task_index=0)
server.join()
"""

WORKER_PROGRAM = """
import json, sys
import tensorgrid as tf
cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.train.Server(cluster, job_name="worker", task_index=0)
with tf.device("/job:ps/task:0"):
    v = tf.Variable(1.0)
with tf.device("/job:worker/task:0"):
    step = tf.assign_add(v, 2.0)
with tf.Session(server.target) as sess:
    sess.run(tf.global_variables_initializer())
    print("value", sess.run(step), flush=True)
"""

CLIENT_PROGRAM = """
import sys
import tensorgrid as tf
with tf.device("/job:ps/task:0"):
    v = tf.Variable(5.0)
try:
    with tf.Session(sys.argv[1], config=tf.ConfigProto(operation_timeout_in_ms=int(sys.argv[2]))) as sess:
        sess.run(tf.global_variables_initializer())
        print("value", sess.run(v), flush=True)
except tf.errors.OpError as e:
    print("error", type(e).__name__, e.message, flush=True)
"""
"""A program that is no task: a session to ``argv[1]`` (``grpc://host:port``) that reads a PS variable."""


def environment(home: str, state_home: Optional[str] = None, extra: Optional[Mapping[str, str]] = None
                ) -> dict[str, str]:
    """A task's environment as a user's shell gives it: no ``TENSORGRID_TLS_DIR``, no
    ``TENSORGRID_INSECURE``; ``HOME`` is ``home``, and ``XDG_STATE_HOME`` is ``state_home``
    (unset when None: the default, ``~/.local/state``)."""
    env = {k: v for k, v in cluster_processes.task_environment().items()
           if k not in (tls.TLS_DIR_ENV, tls.INSECURE_ENV, "XDG_STATE_HOME")}
    env["HOME"] = home
    if state_home is not None:
        env["XDG_STATE_HOME"] = state_home
    env.update(extra or {})
    return env


def start(program: str, args: list[str], env: Mapping[str, str], log_path: str) -> subprocess.Popen[bytes]:
    """``python -c program *args``, its output to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-c", program, *args], env=dict(env), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def cluster_json(ps_port: int, worker_port: int, host: str = "localhost") -> str:
    return json.dumps({"ps": [f"{host}:{ps_port}"], "worker": [f"{host}:{worker_port}"]})


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def train_one_step(directory: str, ps_env: Mapping[str, str], worker_env: Mapping[str, str], ps_port: int,
                   worker_port: int) -> tuple[str, str]:
    """Starts the PS and the worker of a loopback cluster at once, each with its environment;
    returns both logs once both ended (AssertionError naming the logs when one failed)."""
    cluster = cluster_json(ps_port, worker_port)
    ps_log, worker_log = os.path.join(directory, "ps.log"), os.path.join(directory, "worker.log")
    ps = start(PS_PROGRAM, [cluster], ps_env, ps_log)
    worker = start(WORKER_PROGRAM, [cluster], worker_env, worker_log)
    try:
        worker_code = worker.wait(timeout=120)
        ps_code = ps.wait(timeout=90)  # the PS's join() ends the process once the worker finished
    finally:
        stop(worker)
        stop(ps)
    logs = read(ps_log), read(worker_log)
    assert worker_code == 0 and ps_code == 0, f"worker {worker_code}, ps {ps_code}:\n{logs[1]}\n---\n{logs[0]}"
    return logs
