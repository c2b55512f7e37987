"""What keeps the live replica cheap for the primary: a step does not wait for the push that establishes
the replica (state its holder holds none of), and does wait for a later push past the lag bound; a
push's values are written into its frames from the array's own buffer, and parse as the protobuf
message they stand for."""

import threading

import numpy as np

from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.execution import resources as resources_lib
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.v1 import replication_pb2

PRIMARY = "/job:ps/replica:0/task:0"


class HeldPeer:
    """A holder whose pushes wait for ``release`` once ``hold`` is set, answering from a real store."""

    def __init__(self):
        self.store = replication.ReplicaStore()
        self.hold, self.release, self.in_push = threading.Event(), threading.Event(), threading.Event()

    def push(self, push, pieces):
        if self.hold.is_set():
            self.in_push.set()
            assert self.release.wait(10)
        return self.store.apply(push, pieces)

    def fetch(self, primary_task):
        return self.store.snapshot(primary_task)


def _variable(resources, name, value):
    variable = resources.lookup_or_create("", name, resources_lib.Variable, lambda: resources_lib.Variable(
        name, value.dtype, value.shape, backend_lib.for_device("CPU")))
    variable.assign(value, validate_shape=True)
    return variable


def _push_in_background(replicator, peer):
    peer.release.clear()
    peer.in_push.clear()
    peer.hold.set()
    pushing = threading.Thread(target=replicator.push_once, daemon=True)
    pushing.start()
    assert peer.in_push.wait(10)
    return pushing


def _waits(replicator):
    """Whether a step would wait now (its wait still blocked 0.2 s later)."""
    step = threading.Thread(target=replicator.wait_within_lag, daemon=True)
    step.start()
    step.join(0.2)
    return step.is_alive(), step


def test_steps_do_not_wait_for_the_push_establishing_the_replica_but_do_for_later_ones():
    resources = resources_lib.ResourceManager()
    _variable(resources, "global_step", np.array(0, np.int64))
    peer = HeldPeer()
    settings = replication.ReplicationSettings(max_lag_s=1e-3, interval_s=0.01)
    replicator = replication.Replicator(PRIMARY, 5, resources, peer, "ps:1", settings)
    assert replicator.push_once()  # the holder holds the global step

    table = _variable(resources, "table", np.ones((1000, 8), np.float32))  # the chief initializes a table
    pushing = _push_in_background(replicator, peer)  # carries the table whole: the holder holds none of it
    waiting, _ = _waits(replicator)
    assert not waiting
    peer.release.set()
    pushing.join(10)
    assert not pushing.is_alive()

    table.value[[4]] = 2.0
    table.written.wrote_rows(np.array([4]))
    pushing = _push_in_background(replicator, peer)  # only rows the holder's replica has: bound by the lag
    waiting, step = _waits(replicator)
    assert waiting
    peer.release.set()
    pushing.join(10)
    replicator.close()  # its step returns (no loop pushes here to bring the lag back under 1 ms)
    step.join(10)
    held = peer.store.snapshot(PRIMARY)
    values = {piece.key[1]: piece.values for piece in held.rows}
    np.testing.assert_array_equal(values["table"], table.value)


def test_a_piece_s_frame_parses_as_the_message_it_stands_for():
    table = np.arange(24, dtype=np.float32).reshape(6, 4)
    pieces = [replication.Rows(("c", "table"), (6, 4), table[[1, 5]], 3, rows=np.array([1, 5])),
              replication.Rows(("", "table"), (6, 4), table[2:6], 3, row_start=2, row_count=4),
              replication.Rows(("", "global_step"), (), np.array(9, np.int64), 9, row_start=0, row_count=1)]
    header = replication_pb2.ReplicaBatch(primary_task=PRIMARY, primary_incarnation=7, sequence=2).SerializeToString()
    for piece in pieces:
        raw = replication_service._with_piece(header, piece, 5, 6)
        expected = replication_pb2.ReplicaBatch(
            primary_task=PRIMARY, primary_incarnation=7, sequence=2, rows=[replication_pb2.ReplicaRows(
                container=piece.key[0], name=piece.key[1], dtype=piece.values.dtype.name, shape=list(piece.shape),
                rows=[] if piece.rows is None else piece.rows.tolist(), row_start=piece.row_start,
                row_count=piece.row_count, values=np.ascontiguousarray(piece.values).tobytes(),
                updates=piece.updates)])
        assert replication_pb2.ReplicaBatch.FromString(raw) == expected
        back = replication_service._from_proto(replication_pb2.ReplicaBatch.FromString(raw).rows[0])
        np.testing.assert_array_equal(back.values, piece.values)
