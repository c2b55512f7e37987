"""A task refuses a pushed tensor whose rendezvous key names a sending task that the client's
certificate does not name (PERMISSION_DENIED naming both), where certificates tell tasks
apart: each replica of an operator's job has one naming only its own address. Where they
do not (every task on ``localhost``, a certificate naming every task, a client without TLS),
pushes are taken as before. Checked on a real task over the data channel and over gRPC."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tensorgrid as tf
from cluster_processes import TaskProcess, task_environment
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import sender_names
from tensorgrid.distributed.rpc.transport import tls

pytestmark = [pytest.mark.timeout(180)]

PODS = {"ps": ["mnist-ps-0.team.svc:2222"],
        "worker": ["mnist-worker-0.team.svc:2222", "mnist-worker-1.team.svc:2222", "10.0.0.7:2222"]}
PS = "/job:ps/replica:0/task:0"


def _key(sender: str) -> str:
    return f"{sender}/device:CPU:0;00000000000000ab;{PS}/device:CPU:0;gradient:0;0:0"


def _worker(index: int) -> str:
    return f"/job:worker/replica:0/task:{index}"


def _own_names(pod: str) -> frozenset[str]:
    """What the operator puts in a replica's certificate."""
    return frozenset({pod, f"{pod}.team", f"{pod}.team.svc", f"{pod}.team.svc.cluster.local", "localhost",
                      "127.0.0.1", "::1"})


def test_a_key_naming_another_task_than_the_certificate_is_refused_naming_both() -> None:
    check = sender_names.SenderNames(cluster_lib.ClusterSpec(PODS)).check
    worker_1 = _own_names("mnist-worker-1")
    check("PushTensors", [_key(_worker(1))], worker_1)
    with pytest.raises(tf.errors.PermissionDeniedError) as refused:
        check("PushTensors", [_key(_worker(1)), _key(_worker(0))], worker_1)
    assert ("PushTensors: tensor '/job:worker/replica:0/task:0/device:CPU:0;" in refused.value.message
            and "names /job:worker/replica:0/task:0 (at mnist-worker-0.team.svc) as its sender, but the client's "
                "certificate names 127.0.0.1, ::1, localhost, mnist-worker-1, " in refused.value.message
            and "a task may push only its own tensors" in refused.value.message)
    with pytest.raises(tf.errors.PermissionDeniedError, match=r"names /job:ps/replica:0/task:0 \(at mnist-ps-0"):
        check("PushTensors", [_key("/job:ps/task:0")], worker_1)  # the replica field is optional in a device
    with pytest.raises(tf.errors.PermissionDeniedError, match=r"\(at 10.0.0.7\)"):
        check("PushTensors", [_key(_worker(2))], worker_1)
    check("PushTensors", [_key(_worker(2))], frozenset({"10.0.0.7"}))


@pytest.mark.parametrize("names", [
    None,  # no TLS: a Unix socket (the kernel vouches for the peer) or TENSORGRID_INSECURE
    frozenset({"*.team.svc"}),  # a wildcard certificate, as a TLS client would accept it
    frozenset().union(*(_own_names(f"mnist-worker-{i}") for i in (0, 1)), _own_names("mnist-ps-0"),
                      {"10.0.0.7"}),  # one certificate for every task (an earlier operator's job)
])
def test_certificates_that_do_not_tell_tasks_apart_push_for_any_task(names) -> None:
    check = sender_names.SenderNames(cluster_lib.ClusterSpec(PODS)).check
    check("PushTensors", [_key(_worker(0)), _key(_worker(1)), _key(PS)], names)


def test_tasks_sharing_a_host_are_not_checked_and_keys_of_no_task_pass() -> None:
    """``tensorgrid local`` and the tests: every task is localhost, and every certificate names it."""
    loopback = cluster_lib.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]})
    sender_names.SenderNames(loopback).check("PushTensors", [_key(_worker(1))], frozenset({"other.example"}))
    pods = sender_names.SenderNames(cluster_lib.ClusterSpec(PODS))
    pods.check("PushTensors", [_key("/job:evaluator/replica:0/task:0"), "not a key"], frozenset({"x"}))


PUSHER = """
import sys
import numpy as np
import tensorgrid as tf
from tensorgrid.distributed.rpc import clients
address, key = sys.argv[1:]
client = clients.WorkerClient(address, "/job:ps/replica:0/task:0")
try:
    client.push_tensors(7, "/job:worker/replica:0/task:1", [(key, np.full(4, 3.0, np.float32))])
    print("taken")
except tf.errors.PermissionDeniedError as e:
    print("refused:", e.message)
client.close()
"""


@pytest.fixture(scope="module", params=["data channel", "gRPC"])
def ps_at_its_own_address(request, tmp_path_factory):
    """A PS at 127.0.0.2, its workers at 127.0.0.3 and 127.0.0.4: each task's certificate names
    only its own address, as a replica's of the operator does; pushers call over TCP and TLS."""
    tmp = tmp_path_factory.mktemp("senders")
    authority = certificates.new_authority("per-replica CA")
    cluster = {"ps": [f"127.0.0.2:{ports.free_ports(1)[0]}"],
               "worker": [f"127.0.0.3:{ports.free_ports(1)[0]}", f"127.0.0.4:{ports.free_ports(1)[0]}"]}
    directories = {}
    for job, addresses in cluster.items():
        for index, address in enumerate(addresses):
            directories[job, index] = certificates.write_task_directory(
                str(tmp / f"{job}{index}"), authority, f"{job}-{index}", [address.rsplit(":", 1)[0]])
    env = {tls.TLS_DIR_ENV: directories["ps", 0], ports.BIND_ADDRESS_ENV: "127.0.0.2", ports.LOCAL_SOCKETS_ENV: "0"}
    if request.param == "gRPC":
        env["TENSORGRID_DATA_CHANNEL"] = "0"
    ps = TaskProcess("ps", 0, cluster["ps"][0], cluster, str(tmp / "ps.log"), env)
    ps.start()
    try:
        yield ps, directories
    finally:
        ps.kill()


def _push(ps: TaskProcess, directory: str, sender: str) -> str:
    env = task_environment({tls.TLS_DIR_ENV: directory, ports.LOCAL_SOCKETS_ENV: "0"})
    env.pop(tls.INSECURE_ENV, None)
    pushed = subprocess.run([sys.executable, "-c", PUSHER, ps.address, _key(sender)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    return pushed.stdout.strip()


def test_a_task_refuses_a_member_pushing_as_another_and_keeps_serving(ps_at_its_own_address):
    ps, directories = ps_at_its_own_address
    assert _push(ps, directories["worker", 1], _worker(1)) == "taken"
    refused = _push(ps, directories["worker", 1], _worker(0))
    assert refused.startswith("refused: PushTensors: tensor '/job:worker/replica:0/task:0/device:CPU:0;"), refused
    assert ("names /job:worker/replica:0/task:0 (at 127.0.0.3) as its sender, but the client's certificate names "
            "127.0.0.4: a task may push only its own tensors") in refused
    assert _push(ps, directories["worker", 0], _worker(0)) == "taken"
    assert ps.process is not None and ps.process.poll() is None


def test_only_a_task_itself_reports_its_end_and_only_the_chief_stops_a_task() -> None:
    names = sender_names.SenderNames(cluster_lib.ClusterSpec(PODS))
    worker_1 = _own_names("mnist-worker-1")
    names.check_task("Shutdown", ("worker", 1), worker_1, "why")
    names.check_task("Shutdown", ("worker", 0), None, "why")  # no TLS: nothing to hold the client to
    with pytest.raises(tf.errors.PermissionDeniedError) as refused:
        names.check_task("Shutdown", ("worker", 0), worker_1, "only the chief stops a task")
    assert refused.value.message == (
        "Shutdown: the client's certificate names 127.0.0.1, ::1, localhost, mnist-worker-1, mnist-worker-1.team, "
        "mnist-worker-1.team.svc, mnist-worker-1.team.svc.cluster.local, not /job:worker/replica:0/task:0 (at "
        "mnist-worker-0.team.svc): only the chief stops a task")


def test_only_tasks_that_run_sessions_clear_variables() -> None:
    names = sender_names.SenderNames(cluster_lib.ClusterSpec(PODS))
    names.check_jobs("CleanupAll", ["worker"], _own_names("mnist-worker-1"), "why")
    names.check_jobs("CleanupAll", ["worker"], frozenset({"10.0.0.7"}), "why")
    with pytest.raises(tf.errors.PermissionDeniedError, match=r"^CleanupAll: the client's certificate names .*"
                       r"mnist-ps-0.team.svc.cluster.local, no task of chief, worker: only sessions$"):
        names.check_jobs("CleanupAll", ["worker", "chief"], _own_names("mnist-ps-0"), "only sessions")
    loopback = sender_names.SenderNames(cluster_lib.ClusterSpec({"ps": ["localhost:1"], "worker": ["localhost:2"]}))
    loopback.check_jobs("CleanupAll", ["worker"], frozenset({"localhost"}), "why")  # names cannot tell them apart


CALLER = """
import sys
import grpc
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.v1 import worker_pb2, worker_pb2_grpc
address, method, finished, is_chief = sys.argv[1:]
channel = tls.open_channel(address, tls.from_env(), [])
stub = worker_pb2_grpc.WorkerStub(channel)
if method == "CleanupAll":
    request = worker_pb2.CleanupAllRequest()
else:
    request = worker_pb2.ShutdownRequest(reason="test", finished_task=finished, finished_task_is_chief=is_chief == "1")
try:
    getattr(stub, method)(request, timeout=30)
    print("taken")
except grpc.RpcError as e:
    print(e.code().name, e.details())
"""


def _call(ps: TaskProcess, directory: str, method: str, finished: str = "", is_chief: bool = False) -> str:
    env = task_environment({tls.TLS_DIR_ENV: directory, ports.LOCAL_SOCKETS_ENV: "0"})
    env.pop(tls.INSECURE_ENV, None)
    called = subprocess.run([sys.executable, "-c", CALLER, ps.address, method, finished, "1" if is_chief else "0"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert called.returncode == 0, called.stderr
    return called.stdout.strip()


def test_a_task_takes_ends_stops_and_clears_only_from_the_tasks_entitled(ps_at_its_own_address):
    """A member's certificate (worker 1's, the PS's own) cannot report another task's end, stop
    the PS (only the chief, worker 0, may) or clear its variables (the PS runs no sessions)."""
    ps, directories = ps_at_its_own_address
    worker_1, ps_itself = directories["worker", 1], directories["ps", 0]
    assert _call(ps, worker_1, "Shutdown", _worker(0), is_chief=True) == (
        "PERMISSION_DENIED Shutdown: the client's certificate names 127.0.0.4, not /job:worker/replica:0/task:0 "
        "(at 127.0.0.3): a task reports only its own end")
    assert _call(ps, worker_1, "Shutdown", _worker(1), is_chief=True) == (
        "INVALID_ARGUMENT Shutdown: finished_task_is_chief=True for /job:worker/replica:0/task:1, which is not the "
        "chief")
    assert _call(ps, worker_1, "Shutdown", "/job:ps/replica:0/task:0").startswith(
        "INVALID_ARGUMENT Shutdown: finished_task '/job:ps/replica:0/task:0' is not a training task of the cluster "
        "(one of /job:worker/replica:0/task:0, /job:worker/replica:0/task:1)")
    assert _call(ps, worker_1, "Shutdown") == (
        "PERMISSION_DENIED Shutdown: the client's certificate names 127.0.0.4, not /job:worker/replica:0/task:0 "
        "(at 127.0.0.3): only the chief stops a task")
    assert _call(ps, ps_itself, "CleanupAll") == (
        "PERMISSION_DENIED CleanupAll: the client's certificate names 127.0.0.2, no task of worker: only a task that "
        "runs sessions clears variables (Session.reset)")
    assert _call(ps, worker_1, "CleanupAll") == "taken"
    assert _call(ps, worker_1, "Shutdown", _worker(1)) == "taken"  # its own end: the PS waits for worker 0
    assert ps.process is not None and ps.process.poll() is None
