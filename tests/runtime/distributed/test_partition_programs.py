"""A distributed step's partitions (with their Recvs) run as generated programs
(``async_program.AsyncStepProgram``) once they ran ``PLAN_RUNS_BEFORE_GENERATION`` steps: a
small embedding model on 1 PS + 1 worker (servers in this process) trains to the values of
the node-by-node dataflow loop and of TensorFlow 2.21 (the oracle); a step cancelled by its
deadline while the worker's Recv waits for the PS ends with the same error class as before
and as TensorFlow's; an op failing on the PS names that op, as the dataflow loop does.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid
from tensorgrid.distributed.rpc import ports
from tensorgrid.execution import async_program
from tensorgrid.execution import call_program

pytestmark = pytest.mark.timeout(120)

STEPS = call_program.PLAN_RUNS_BEFORE_GENERATION + 4
"""Steps of each test: the first ones through ``Plan.run``, the last ones through the programs."""


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def servers(lib: Any) -> tuple[Any, Any]:
    """A PS and a worker server of ``lib``, both in this process."""
    ps_port, worker_port = ports.free_ports(2)
    cluster = lib.train.ClusterSpec({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]})
    return (lib.train.Server(cluster, job_name="ps", task_index=0),
            lib.train.Server(cluster, job_name="worker", task_index=0))


def stop(lib: Any, *started: Any) -> None:
    if lib is tensorgrid:
        for server in started:
            server.stop()


def partition_programs(*started: Any) -> list[Any]:
    """The programs of every partition registered on tensorgrid servers."""
    return [registered.program for server in started for registered in server.worker._graphs.values()]


def assert_generated(programs: list[Any]) -> None:
    """The partitions with Recvs run through generated functions (on the worker and the PS)."""
    asynchronous = [p for p in programs if isinstance(p, async_program.AsyncStepProgram)]
    assert len(asynchronous) >= 2 and all(p.generated for p in asynchronous)


def embedding_model(lib: Any) -> tuple[Any, Any, list[Any], Any]:
    """Ids and dense features in, an embedding table and a dense layer on the PS, Adagrad."""
    rng = np.random.default_rng(7)
    ids = lib.placeholder(lib.int64, [None], name="ids")
    dense = lib.placeholder(lib.float32, [None, 3], name="dense")
    with lib.device("/job:ps/task:0"):
        table = lib.Variable(rng.standard_normal((50, 4)).astype(np.float32), name="table")
        weights = lib.Variable(rng.standard_normal((7, 1)).astype(np.float32), name="weights")
        global_step = lib.train.get_or_create_global_step()
    with lib.device("/job:worker/task:0"):
        rows = lib.nn.embedding_lookup(table, ids)
        logits = lib.matmul(lib.concat([rows, dense], 1), weights)
        loss = lib.reduce_mean(lib.square(logits - 1.0))
        train = lib.train.AdagradOptimizer(0.1).minimize(loss, global_step=global_step)
    return train, loss, [ids, dense], [table, weights]


def batches() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [(rng.integers(0, 50, 8).astype(np.int64), rng.standard_normal((8, 3)).astype(np.float32))
            for _ in range(STEPS)]


def train(lib: Any) -> tuple[list[float], list[np.ndarray], list[Any]]:
    """Each step's loss and the variables after STEPS steps; the partitions' programs."""
    ps, worker = servers(lib)
    try:
        train_op, loss, (ids, dense), variables = embedding_model(lib)
        with lib.Session(worker.target) as session:
            session.run(lib.global_variables_initializer())
            losses = [float(session.run([train_op, loss], {ids: i, dense: d})[1]) for i, d in batches()]
            final = session.run(variables)
            programs = partition_programs(ps, worker) if lib is tensorgrid else []
        return losses, final, programs
    finally:
        stop(lib, worker, ps)


def test_training_steps_equal_the_dataflow_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    with tensorgrid.Graph().as_default():
        losses, final, programs = train(tensorgrid)
    assert_generated(programs)
    monkeypatch.setattr(call_program, "PLAN_RUNS_BEFORE_GENERATION", 10 ** 9)
    with tensorgrid.Graph().as_default():
        loop_losses, loop_final, loop_programs = train(tensorgrid)
    assert not any(getattr(p, "generated", False) for p in loop_programs)
    assert losses == loop_losses  # the same kernels on the same values: the same bits
    for value, by_loop in zip(final, loop_final):
        np.testing.assert_array_equal(value, by_loop)


def test_training_steps_equal_tensorflow(tf1: Any) -> None:
    with tensorgrid.Graph().as_default():
        losses, final, _ = train(tensorgrid)
    with tf1.Graph().as_default():
        oracle_losses, oracle_final, _ = train(tf1)
    np.testing.assert_allclose(losses, oracle_losses, rtol=1e-5)
    for value, by_oracle in zip(final, oracle_final):
        np.testing.assert_allclose(value, by_oracle, rtol=1e-5, atol=1e-6)


def test_a_step_whose_recv_waits_ends_at_its_deadline(lib: Any) -> None:
    """The worker's Recv waits for a dequeue on the PS from an empty queue: the step's deadline
    cancels it, with the error class TensorFlow raises, and the session runs steps after it."""
    ps, worker = servers(lib)
    try:
        with lib.device("/job:ps/task:0"):
            queue = lib.FIFOQueue(STEPS + 1, [lib.float32], shapes=[[]], shared_name="q")
            enqueue = queue.enqueue([lib.constant(2.0)])
            taken = queue.dequeue()
        with lib.device("/job:worker/task:0"):
            doubled = taken * 2.0
        with lib.Session(worker.target) as session:
            for _ in range(STEPS):
                session.run(enqueue)
                assert session.run(doubled) == 4.0
            if lib is tensorgrid:
                assert_generated(partition_programs(ps, worker))
            options = lib.RunOptions(timeout_in_ms=300)
            with pytest.raises(lib.errors.DeadlineExceededError):
                session.run(doubled, options=options)
            session.run(enqueue)
            assert session.run(doubled) == 4.0
    finally:
        stop(lib, worker, ps)


def test_an_op_failing_on_the_ps_is_named(lib: Any) -> None:
    ps, worker = servers(lib)
    try:
        with lib.device("/job:worker/task:0"):
            index = lib.placeholder(lib.int32, [1])
            received = index + 0  # computed on the worker: the PS's gather takes it through a Recv
        with lib.device("/job:ps/task:0"):
            table = lib.Variable(np.arange(6, dtype=np.float32), name="table")
            gathered = lib.gather(table, received, name="the_gather") * 3.0
        with lib.device("/job:worker/task:0"):
            total = gathered + 1.0
        with lib.Session(worker.target) as session:
            session.run(table.initializer)
            for step in range(STEPS):
                assert session.run(total, {index: [step % 6]}) == [3.0 * (step % 6) + 1.0]
            if lib is tensorgrid:
                assert_generated(partition_programs(ps, worker))
            with pytest.raises(lib.errors.InvalidArgumentError, match="the_gather"):
                session.run(total, {index: [6]})
            assert session.run(total, {index: [1]}) == [4.0]
    finally:
        stop(lib, worker, ps)
