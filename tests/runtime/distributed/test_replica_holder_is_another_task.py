"""A task never holds its own replica: a push or a fetch that reaches the primary itself (a
standby's Service whose DNS still names the pod that took over) is refused by incarnation, and
the primary keeps retrying, with its steps not waiting, until another task answers there."""

import logging

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.execution import resources as resources_lib
from tensorgrid.framework import errors
from tensorgrid.kernels import backend as backend_lib

PRIMARY = "/job:ps/replica:0/task:0"
CPU = backend_lib.for_device("CPU")


@pytest.mark.parametrize("owner, incarnation, refused", [
    (7, 7, True),  # the store of the primary's own task
    (7, 8, False),  # another task's: a holder
    (0, 7, False),  # a standby's store (it is no primary)
    (7, 0, False),  # a fetch that does not say who asks
])
def test_a_store_refuses_a_push_and_a_fetch_of_its_own_task(owner, incarnation, refused):
    store = replication.ReplicaStore(owner)
    push = replication.Push(PRIMARY, incarnation, 1, full=True)
    piece = replication.Rows(("", "global_step"), (), np.array(3, np.int64), 1, row_start=0, row_count=1)
    if refused:
        with pytest.raises(errors.FailedPreconditionError, match=f"reached {PRIMARY} itself .* never holds its own"):
            store.apply(push, [piece])
        with pytest.raises(errors.FailedPreconditionError, match="a fetch of the replica"):
            store.snapshot(PRIMARY, incarnation)
        assert store.primaries() == []
    else:
        assert store.apply(push, [piece]).sequence == 1
        assert store.snapshot(PRIMARY, incarnation) is not None


def test_a_ps_whose_holder_address_reaches_itself_retries_until_another_task_answers(monkeypatch, caplog):
    address, standby_address = (f"localhost:{p}" for p in ports.free_ports(2))
    monkeypatch.setenv("TENSORGRID_PS_REPLICA_ADDRESS", address)  # its own: as a stale DNS name would say
    monkeypatch.setenv("TENSORGRID_PS_REPLICA_FETCH_WAIT_S", "3")
    caplog.set_level(logging.INFO, logger="tensorgrid.replication")
    server = tf.train.Server({"ps": [address], "worker": [f"localhost:{ports.free_ports(1)[0]}"]}, "ps", 0)
    standby, standby_store = None, None
    try:
        primary = server.replication
        assert primary is not None
        primary.replicator.close()  # this test pushes by hand, with replicators of its own
        server.worker.before_step()  # returns once the start's load has ended
        assert primary.restored is None  # its fetch was refused: it started empty, the checkpoint's case
        assert "a fetch of the replica of /job:ps/replica:0/task:0 reached" in caplog.text
        variable = server.worker.resources.lookup_or_create(
            "", "global_step", resources_lib.Variable,
            lambda: resources_lib.Variable("global_step", np.dtype(np.int64), (), CPU))
        variable.assign(np.array(9, np.int64), validate_shape=True)
        settings = replication.ReplicationSettings(max_lag_s=0.01)
        to_itself = replication_service.ReplicationClient(address, server.worker.incarnation)
        standby_client = replication_service.ReplicationClient(standby_address, server.worker.incarnation)
        try:
            replicator = replication.Replicator(PRIMARY, server.worker.incarnation, server.worker.resources,
                                                to_itself, "the standby", settings)
            assert not replicator.push_once()
            assert server.replica_store.primaries() == []  # it did not take its own push
            assert "a push of the replica of /job:ps/replica:0/task:0 reached" in caplog.text
            replicator.wait_within_lag()  # returns: a refused holder does not hold the steps

            # Another task answering at the holder's address (the next standby) takes the push.
            standby, standby_store = replication_service.serve_standby(standby_address, PRIMARY)
            replicator = replication.Replicator(PRIMARY, server.worker.incarnation, server.worker.resources,
                                                standby_client, "the standby", settings)
            assert replicator.push_once()
            snapshot = standby_store.snapshot(PRIMARY, server.worker.incarnation + 1)
            assert snapshot is not None and snapshot.primary_incarnation == server.worker.incarnation
        finally:
            to_itself.close()
            standby_client.close()
    finally:
        if standby is not None:
            standby.stop(grace=0)
        server.stop()
