"""Tensors pushed to a task are counted against who pushed them, as the task's server saw
it (the peer process of a Unix socket, the host or loopback connection of TCP), never
against the sending task their rendezvous keys name, which the pusher writes itself.

Two pushers in two processes: one pushes a tensor that a step will take later; the other,
a member of the job (it has the run's certificate), floods the task with tensors whose
keys name the first one's task as their sender. Over the rendezvous's byte limit the
flood drops its own oldest tensors, and the first pusher's tensor is still there to take.
On the data channel (a Unix socket between processes of this machine) and over gRPC.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster, task_environment
from tensorgrid.distributed.rpc import clients

pytestmark = [pytest.mark.timeout(240)]

MiB = 1 << 20
PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"
PUSHER = """
import sys
import numpy as np
from tensorgrid.distributed.rpc import clients
address, task, step, key = sys.argv[1:]
client = clients.WorkerClient(address, task)
client.push_tensors(int(step), "/job:worker/replica:0/task:0", [(key, np.full(MiB // 4, 7.0, np.float32))])
client.close()
""".replace("MiB", str(MiB))


@pytest.fixture(scope="module", params=["data channel", "gRPC"])
def ps_task(request, tmp_path_factory):
    env = {"TENSORGRID_RENDEZVOUS_MAX_BYTES": str(8 * MiB)}
    if request.param == "gRPC":
        env["TENSORGRID_DATA_CHANNEL"] = "0"
    with LocalCluster(tmp_path_factory.mktemp("origins"), {"ps": 1}, extra_env=env) as cluster:
        yield cluster.task("ps")


def test_a_flood_of_keys_naming_another_sender_drops_only_its_own_tensors(ps_task):
    ps = clients.WorkerClient(ps_task.address, PS)
    incarnation = ps.incarnation_quick()
    awaited = f"{WORKER};{incarnation:016x};{PS};gradient:0;0:0"
    pushed = subprocess.run([sys.executable, "-c", PUSHER, ps_task.address, PS, "77", awaited],
                            env=task_environment(), capture_output=True, text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    forged = [f"{WORKER};{incarnation:016x};{PS};forged{i}:0;0:0" for i in range(40)]
    for i, key in enumerate(forged):  # 40 MiB in all, the limit is 8 MiB
        ps.push_tensors(1000 + i, WORKER, [(key, np.zeros(MiB // 4, np.float32))])
    np.testing.assert_array_equal(ps.recv_tensor(77, awaited), np.full(MiB // 4, 7.0, np.float32))
    with pytest.raises(tf.errors.AbortedError, match="the oldest of the origin sending the most"):
        ps.recv_tensor(1000, forged[0])
    np.testing.assert_array_equal(ps.recv_tensor(1039, forged[-1]), np.zeros(MiB // 4, np.float32))
    ps.close()


@pytest.mark.parametrize("peer, identity", [
    ("ipv4:10.0.0.5:41234", "host 10.0.0.5"),
    ("ipv4:127.0.0.1:41234", "connection from 127.0.0.1 port 41234"),
    ("ipv6:%5B::1%5D:41234", "connection from ::1 port 41234"),
    ("ipv6:[fd00::7]:41234", "host fd00::7"),
    ("ipv6:[::ffff:127.0.0.1]:5", "connection from ::ffff:127.0.0.1 port 5"),
    ("unix:/tmp/socket", "gRPC peer unix:/tmp/socket"),
])
def test_a_grpc_peer_is_identified_as_on_the_data_channel(peer, identity):
    from tensorgrid.distributed.rpc import services

    assert services.grpc_peer_identity(peer) == identity
