"""SyncReplicasOptimizer in one process: a chief and worker threads sharing one session.

The model is ``loss = sum(w * x)``, so a replica's gradient is exactly the ``x`` it
feeds and every aggregated update is predictable: ``w -= lr * mean(accepted x)``.
One tf.Session plays the parameter server that every replica reaches; the chief's
queue runner (started by its hook) aggregates, applies and hands out tokens.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

pytestmark = pytest.mark.gpu_node

LR = 0.5


class _Unclosable:
    """A worker's view of the shared session: closing its MonitoredSession leaves the PS alone."""

    def __init__(self, sess: tf.Session) -> None:
        self._sess = sess
        self.graph = sess.graph

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._sess.run(*args, **kwargs)

    def close(self) -> None:
        pass


class _SessionOf(tf.train.SessionCreator):
    """Hands a MonitoredSession the shared session (closable only by its owner)."""

    def __init__(self, sess: tf.Session, owner: bool) -> None:
        self._sess = sess
        self._owner = owner

    def create_session(self) -> Any:
        return self._sess if self._owner else _Unclosable(self._sess)


def _model(replicas_to_aggregate: int, total_num_replicas: int) -> dict[str, Any]:
    step = tf.train.get_or_create_global_step()
    w = tf.Variable([0.0, 0.0], name="w")
    x = tf.placeholder(tf.float32, [2], name="x")
    loss = tf.reduce_sum(w * x)
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR),
                                         replicas_to_aggregate=replicas_to_aggregate,
                                         total_num_replicas=total_num_replicas)
    train_op = opt.minimize(loss, global_step=step)
    return {"step": step, "w": w, "x": x, "opt": opt, "train_op": train_op}


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _start_chief(sess: tf.Session, opt: tf.train.SyncReplicasOptimizer, num_tokens: int = -1) -> tf.train.Coordinator:
    """What the chief's MonitoredSession does: initialize, then the sync hook's after_create_session."""
    hook = opt.make_session_run_hook(is_chief=True, num_tokens=num_tokens)
    hook.begin()
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    coord = tf.train.Coordinator()
    hook.after_create_session(sess, coord)
    return coord


@pytest.mark.timeout(30)
def test_updates_are_the_mean_of_fresh_gradients_and_stale_ones_are_dropped() -> None:
    m = _model(replicas_to_aggregate=2, total_num_replicas=3)
    step, w, x, opt, train_op = m["step"], m["w"], m["x"], m["opt"], m["train_op"]
    counts = [acc.num_accumulated() for acc, _ in opt._accumulator_list]
    local_step = opt._local_step
    sess = tf.Session()
    coord = _start_chief(sess, opt)
    try:
        # Step 0: two replicas push; the chief applies their mean once.
        sess.run(train_op, {x: [1.0, 2.0]})
        assert sess.run(step) == 0, "one gradient is not enough for replicas_to_aggregate=2"
        sess.run(train_op, {x: [3.0, 6.0]})
        _wait_until(lambda: sess.run(step) == 1, "the first aggregated step")
        np.testing.assert_allclose(sess.run(w), [-LR * 2.0, -LR * 4.0])

        # The backup replica computed its gradient at step 0: it is stale now and dropped,
        # and the token it gets carries the new global step.
        sess.run(train_op, {x: [100.0, 100.0]})
        assert sess.run(counts) == [0]
        assert sess.run(local_step) == 1
        np.testing.assert_allclose(sess.run(w), [-LR * 2.0, -LR * 4.0])

        # Step 1: fresh gradients are averaged again; the global step moves by one.
        sess.run(train_op, {x: [5.0, 5.0]})
        assert sess.run(counts) == [1]
        sess.run(train_op, {x: [7.0, 9.0]})
        _wait_until(lambda: sess.run(step) == 2, "the second aggregated step")
        np.testing.assert_allclose(sess.run(w), [-LR * (2.0 + 6.0), -LR * (4.0 + 7.0)])
        time.sleep(0.1)
        assert sess.run(step) == 2, "the global step advances once per aggregated step"
    finally:
        coord.request_stop()
        sess.close()
        coord.join(stop_grace_period_secs=5)


@pytest.mark.timeout(30)
def test_a_replica_run_ends_only_when_its_step_has_been_aggregated() -> None:
    m = _model(replicas_to_aggregate=2, total_num_replicas=2)
    step, w, x, opt, train_op = m["step"], m["w"], m["x"], m["opt"], m["train_op"]
    sess = tf.Session()
    coord = _start_chief(sess, opt, num_tokens=0)  # no free first step: every run waits for its step
    try:
        for expected_step in (1, 2):
            early = threading.Thread(target=sess.run, args=(train_op, {x: [2.0, 0.0]}), daemon=True)
            early.start()
            early.join(0.3)
            assert early.is_alive(), "a replica finished its step before the other replica contributed"
            assert sess.run(step) == expected_step - 1
            sess.run(train_op, {x: [0.0, 4.0]})
            early.join(5)
            assert not early.is_alive()
            assert sess.run(step) == expected_step
        np.testing.assert_allclose(sess.run(w), [-2 * LR * 1.0, -2 * LR * 2.0])
    finally:
        coord.request_stop()
        sess.close()
        coord.join(stop_grace_period_secs=5)


def _train_replicas(num_replicas: int, replicas_to_aggregate: int, last_step: int,
                    per_replica_optimizers: bool) -> tuple[int, np.ndarray, float]:
    """Trains with a chief and ``num_replicas - 1`` worker threads; returns (step, w, seconds)."""
    gradient = np.array([1.0, 2.0], np.float32)
    step = tf.train.get_or_create_global_step()
    w = tf.Variable([0.0, 0.0], name="w")
    replicas = []
    for i in range(num_replicas if per_replica_optimizers else 1):
        # Between-graph replication in one graph: each replica builds its own optimizer
        # (its own local step) on the shared accumulators and token queue.
        x = tf.placeholder(tf.float32, [2], name=f"x{i}")
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR),
                                             replicas_to_aggregate=replicas_to_aggregate,
                                             total_num_replicas=num_replicas)
        replicas.append((x, opt, opt.minimize(tf.reduce_sum(w * x), global_step=step)))
    replicas = [replicas[i % len(replicas)] for i in range(num_replicas)]
    final = tf.train.FinalOpsHook({"step": step, "w": w})
    shared = tf.Session()
    shared.run([tf.global_variables_initializer(), tf.local_variables_initializer()])

    def hooks(i: int) -> list[Any]:
        return [replicas[i][1].make_session_run_hook(is_chief=i == 0), tf.train.StopAtStepHook(last_step=last_step)]

    chief = tf.train.MonitoredSession(session_creator=_SessionOf(shared, owner=True), hooks=hooks(0) + [final])
    workers = [tf.train.MonitoredSession(session_creator=_SessionOf(shared, owner=False), hooks=hooks(i))
               for i in range(1, num_replicas)]
    errors: list[BaseException] = []

    def train(sess: Any, i: int) -> None:
        x, _, train_op = replicas[i]
        try:
            with sess:
                while not sess.should_stop():
                    sess.run(train_op, {x: gradient})
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    started = time.monotonic()
    threads = [threading.Thread(target=train, args=(sess, i + 1), daemon=True) for i, sess in enumerate(workers)]
    for t in threads:
        t.start()
    with chief:
        while not chief.should_stop():
            chief.run(replicas[0][2], {replicas[0][0]: gradient})
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads), "a worker never finished"
    elapsed = time.monotonic() - started
    assert errors == []
    return int(final.final_ops_values["step"]), final.final_ops_values["w"], elapsed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_replicas", [2, 3])
def test_replica_threads_train_to_the_last_step_without_deadlock(num_replicas: int) -> None:
    final_step, w, elapsed = _train_replicas(num_replicas, replicas_to_aggregate=2, last_step=15,
                                             per_replica_optimizers=False)
    assert final_step >= 15
    # Every replica feeds the same gradient, so each aggregated step moves w by exactly lr * g.
    np.testing.assert_allclose(w, -LR * final_step * np.array([1.0, 2.0]), rtol=1e-6)
    assert elapsed < 10, "closing the chief must not wait for its queue runner's grace period"


@pytest.mark.timeout(30)
def test_between_graph_replicas_with_a_backup_worker_reach_the_last_step() -> None:
    final_step, w, elapsed = _train_replicas(3, replicas_to_aggregate=2, last_step=15, per_replica_optimizers=True)
    assert final_step >= 15
    np.testing.assert_allclose(w, -LR * final_step * np.array([1.0, 2.0]), rtol=1e-6)
    assert elapsed < 10


def test_init_tokens_and_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="replicas_to_aggregate must be >= 1"):
        tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=0)
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=3,
                                         total_num_replicas=2)
    with pytest.raises(ValueError, match="after apply_gradients"):
        opt.get_init_tokens_op()
    with pytest.raises(ValueError, match="after apply_gradients"):
        opt.get_chief_queue_runner()
    with pytest.raises(ValueError, match="apply_gradient should be called before"):
        opt.make_session_run_hook(is_chief=True).begin()
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0)
    with pytest.raises(ValueError, match="Global step is required"):
        opt.apply_gradients([(tf.constant(1.0), w)])
    opt.apply_gradients([(tf.constant(1.0), w)], global_step=step)
    with pytest.raises(ValueError, match="Too few tokens.*0 \\(given\\) vs 1 \\(needed\\)"):
        opt.get_init_tokens_op(num_tokens=0)


def test_chief_tokens_fill_the_queue_for_the_first_step(session: tf.Session) -> None:
    m = _model(replicas_to_aggregate=3, total_num_replicas=3)
    opt = m["opt"]
    init_tokens = opt.get_init_tokens_op()
    size = opt._sync_token_queue.size()
    session.run(tf.global_variables_initializer())
    session.run(init_tokens)
    assert session.run(size) == 3
    assert session.run(opt.get_init_tokens_op(num_tokens=5)) is None
    assert session.run(size) == 8


@pytest.mark.timeout(30)
def test_a_single_sync_replica_trains_under_monitored_training_session(tmp_path: Any) -> None:
    m = _model(replicas_to_aggregate=1, total_num_replicas=1)
    step, w, x, opt, train_op = m["step"], m["w"], m["x"], m["opt"], m["train_op"]
    final = tf.train.FinalOpsHook({"step": step, "w": w})
    hooks = [opt.make_session_run_hook(is_chief=True), tf.train.StopAtStepHook(last_step=5), final]
    started = time.monotonic()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, {x: [1.0, -1.0]})
    assert time.monotonic() - started < 10
    assert final.final_ops_values["step"] == 5
    np.testing.assert_allclose(final.final_ops_values["w"], [-5 * LR, 5 * LR])
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-5")
