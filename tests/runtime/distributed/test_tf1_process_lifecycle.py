"""How a TF1 program's processes begin and end, as TF1 programs expect.

TF1 programs are written as ``if job_name == "ps": server.join()`` followed by the worker's
code, because TensorFlow's ``join()`` never returns: once training is over a PS's process
must end (status 0, after its ``finally`` blocks and ``atexit`` handlers), never fall
through into the worker's code. And ``tensorgrid local`` stops every task on SIGTERM and
SIGHUP (``timeout``, ``kill``, a closed terminal) as it does on Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cluster_processes import task_environment

TF1_PROGRAM = textwrap.dedent("""
    import atexit
    import os
    import sys
    import time

    import tensorgrid as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster, job, index = resolver.cluster_spec(), resolver.task_type, resolver.task_id
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    print(f"{job} pid {os.getpid()}", flush=True)
    if job == "ps":
        atexit.register(lambda: print("ps atexit ran", flush=True))
        try:
            server.join()
        finally:
            print("ps finally ran", flush=True)
    if len(sys.argv) > 1 and sys.argv[1] == "wait":
        time.sleep(600)
    print(f"{job} runs the worker's code", flush=True)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        train = tf.assign_add(step, 1)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as session:
        print("global step", session.run(train), flush=True)
""")


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "tf1_program.py"
    path.write_text(TF1_PROGRAM)
    return path


def local(program: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "1", "--",
                             sys.executable, str(program), *args],
                            env=task_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_ps_join_ends_the_process_instead_of_returning_into_the_worker_code(program: Path) -> None:
    launcher = local(program)
    output, _ = launcher.communicate(timeout=180)
    assert launcher.returncode == 0, output
    assert "global step 1" in output, output
    assert "ps runs the worker's code" not in output, output
    assert "ps finally ran" in output and "ps atexit ran" in output, output
    assert "ps:0=0" in output, output  # the PS's own status, in the launcher's summary


def test_join_returns_in_a_thread_other_than_the_main_one() -> None:
    # Only the main thread can end the process; a server joined from a helper thread returns.
    program = textwrap.dedent("""
        import threading
        import tensorgrid as tf
        server = tf.train.Server.create_local_server()
        joined = threading.Thread(target=server.join)
        joined.start()
        server.request_stop("the test is done")
        joined.join(timeout=30)
        print("returned" if not joined.is_alive() else "still joined", flush=True)
    """)
    result = subprocess.run([sys.executable, "-c", program], env=task_environment(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "returned" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_tensorgrid_local_stops_every_task_on_a_stop_signal(program: Path, signum: int) -> None:
    launcher = local(program, "wait")
    assert launcher.stdout is not None
    pids: dict[str, int] = {}
    deadline = time.monotonic() + 120
    while len(pids) < 2 and time.monotonic() < deadline:
        line = launcher.stdout.readline()
        if not line:
            break
        if " pid " in line:
            role, _, pid = line.split("]", 1)[-1].split()
            pids[role] = int(pid)
    assert set(pids) == {"ps", "worker"}, pids
    launcher.send_signal(signum)
    output, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signum, output
    assert f"received signal {int(signum)}: stopping every task" in output, output
    for role, pid in pids.items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        pytest.fail(f"the {role} (pid {pid}) still runs after the launcher's signal {int(signum)}")
