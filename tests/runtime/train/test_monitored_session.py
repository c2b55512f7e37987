"""MonitoredSession, MonitoredTrainingSession and SessionManager, in-process.

In-process sessions keep their variables private, so the cases that need a model
shared between sessions (a chief that finds the model already live, a worker that
waits for the chief) use a SessionManager whose ``_new_session`` hands out one
long-lived session, which is what a remote session to a surviving PS amounts to.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf


def _model(lr: float = 0.1) -> tuple[tf.Variable, Any, Any]:
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(0.0, name="w")
    loss = tf.square(w - 3.0)
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step=step)
    return w, train_op, step


def _w_after(steps: int) -> float:
    """``w`` after ``steps`` gradient steps of size 0.1 on ``(w - 3)^2`` from 0."""
    return 3.0 - 3.0 * 0.8 ** steps


def _train(sess: Any, train_op: Any, limit: int = 1000) -> int:
    runs = 0
    while not sess.should_stop():
        sess.run(train_op)
        runs += 1
        assert runs < limit, "the session never asked to stop"
    return runs


def _checkpoint_steps(directory: Any) -> list[int]:
    return sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(directory)
                  if name.startswith("model.ckpt-") and name.endswith(".index"))


# ---------------------------------------------------------------------- MonitoredTrainingSession

def test_monitored_training_session_trains_and_checkpoints(tmp_path: Any) -> None:
    w, train_op, step = _model()
    final = tf.train.FinalOpsHook({"w": w, "step": step})
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=4,
                                           hooks=[tf.train.StopAtStepHook(last_step=10), final]) as sess:
        assert _train(sess, train_op) == 10
    assert final.final_ops_values["step"] == 10
    assert final.final_ops_values["w"] == pytest.approx(_w_after(10), rel=1e-5)
    assert _checkpoint_steps(tmp_path) == [0, 4, 8, 10]
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 10
    assert reader.get_tensor("w") == pytest.approx(_w_after(10), rel=1e-5)


def test_a_second_monitored_training_session_resumes_from_the_checkpoint(tmp_path: Any) -> None:
    w, train_op, step = _model()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
                                           hooks=[tf.train.StopAtStepHook(last_step=6)]) as sess:
        _train(sess, train_op)

    tf.reset_default_graph()
    w, train_op, step = _model()
    restored: list[Any] = []

    class ReadAtStart(tf.train.SessionRunHook):
        def after_create_session(self, session: Any, coord: Any) -> None:
            restored.extend(session.run([step, w]))

    final = tf.train.FinalOpsHook({"w": w, "step": step})
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
                                           hooks=[ReadAtStart(), tf.train.StopAtStepHook(num_steps=3), final]) as sess:
        assert _train(sess, train_op) == 3
    assert restored[0] == 6
    assert restored[1] == pytest.approx(_w_after(6), rel=1e-5)
    assert final.final_ops_values["step"] == 9
    assert final.final_ops_values["w"] == pytest.approx(_w_after(9), rel=1e-5)
    assert _checkpoint_steps(tmp_path)[-1] == 9


def test_monitored_training_session_without_checkpoint_dir_writes_nothing(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, train_op, _ = _model()
    monkeypatch.chdir(tmp_path)
    with tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(last_step=3)]) as sess:
        _train(sess, train_op)
    assert os.listdir(tmp_path) == []


def test_chief_only_hooks_run_before_the_hooks_and_only_on_the_chief() -> None:
    _, train_op, _ = _model()
    calls: list[str] = []

    class Named(tf.train.SessionRunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        def before_run(self, run_context: tf.train.SessionRunContext) -> None:
            calls.append(self.name)

    with tf.train.MonitoredTrainingSession(hooks=[Named("hook")], chief_only_hooks=[Named("chief")],
                                           log_step_count_steps=0) as sess:
        sess.run(train_op)
    assert calls == ["chief", "hook"]


@pytest.mark.timeout(30)
def test_non_chief_gives_up_when_the_model_is_never_initialized() -> None:
    _model()
    started = time.monotonic()
    with pytest.raises(tf.errors.DeadlineExceededError, match="not ready.*Variables not initialized"):
        tf.train.MonitoredTrainingSession(is_chief=False, max_wait_secs=0.3)
    assert time.monotonic() - started < 5


# ---------------------------------------------------------------------- the with statement

def test_out_of_range_ends_the_with_block_cleanly_and_runs_the_end_hooks() -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    fill = q.enqueue_many(([1, 2, 3],))
    close = q.close()
    take = q.dequeue()
    final = tf.train.FinalOpsHook(q.size())
    taken = []
    with tf.train.MonitoredSession(hooks=[final]) as sess:
        sess.run([fill])
        sess.run(close)
        while True:
            taken.append(sess.run(take))
    assert taken == [1, 2, 3]
    assert final.final_ops_values == 0, "end() runs when the input ran out"


def test_other_errors_leave_the_with_block_and_skip_the_end_hooks() -> None:
    x = tf.placeholder(tf.float32, [], name="x")
    doubled = x * 2.0
    final = tf.train.FinalOpsHook(tf.constant(1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="x"):
        with tf.train.MonitoredSession(hooks=[final]) as sess:
            sess.run(doubled)  # x is not fed
    assert final.final_ops_values is None


def test_close_is_idempotent_and_the_session_is_unusable_after() -> None:
    _, train_op, _ = _model()
    sess = tf.train.MonitoredSession()
    sess.run(train_op)
    sess.close()
    sess.close()
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match="already closed"):
        sess.run(train_op)


def test_singular_monitored_session_exposes_the_raw_session() -> None:
    w, train_op, _ = _model()
    with tf.train.SingularMonitoredSession() as sess:
        sess.run(train_op)
        assert isinstance(sess.raw_session(), tf.Session)
        assert sess.raw_session().run(w) == pytest.approx(_w_after(1))


@pytest.mark.timeout(30)
def test_monitored_session_starts_the_graphs_queue_runners() -> None:
    q = tf.FIFOQueue(4, tf.int32, shapes=())
    counter = tf.Variable(0)
    produce = q.enqueue(tf.assign_add(counter, 1))
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [produce]))
    take = q.dequeue_many(3)
    with tf.train.MonitoredSession() as sess:
        np.testing.assert_array_equal(sess.run(take), [1, 2, 3])


@pytest.mark.timeout(30)
def test_a_failing_queue_runner_stops_the_session_and_its_error_is_raised_at_close() -> None:
    q = tf.FIFOQueue(4, tf.float32, shapes=())
    bad = tf.placeholder_with_default(tf.constant([1.0, 2.0]), [None])
    # Reshaping two elements to a scalar fails in the queue runner's thread.
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(tf.reshape(bad, []))]))
    sess = tf.train.MonitoredSession()
    deadline = time.monotonic() + 10
    while not sess.should_stop():
        assert time.monotonic() < deadline, "the failed queue runner did not stop the session"
        time.sleep(0.01)
    with pytest.raises(tf.errors.InvalidArgumentError):
        sess.close()


# ---------------------------------------------------------------------- recovery

class _AbortOnce(tf.train.SessionRunHook):
    """Raises AbortedError in before_run the first ``times`` times, as a PS restart would."""

    def __init__(self, times: int = 1) -> None:
        self.times = times
        self.sessions: list[Any] = []

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.sessions.append(session)

    def before_run(self, run_context: tf.train.SessionRunContext) -> None:
        if self.times > 0:
            self.times -= 1
            raise tf.errors.AbortedError(None, None, "the parameter server restarted")


def test_an_aborted_run_creates_a_new_session_and_is_retried() -> None:
    w, train_op, step = _model()
    aborter = _AbortOnce()
    with tf.train.MonitoredSession(hooks=[aborter]) as sess:
        sess.run(train_op)
        assert sess.recoveries == 1
        assert len(aborter.sessions) == 2
        assert aborter.sessions[0] is not aborter.sessions[1]
        assert sess.run(step) == 1, "the retried run trained exactly once"


def test_recovery_restores_the_latest_checkpoint(tmp_path: Any) -> None:
    w, train_op, step = _model()
    aborter = _AbortOnce(times=0)
    final = tf.train.FinalOpsHook({"w": w, "step": step})
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
                                           hooks=[aborter, final]) as sess:
        for _ in range(3):
            sess.run(train_op)  # checkpoints at steps 0 and 2; step 3 lives only in the session
        aborter.times = 1
        sess.run(train_op)
        assert sess.recoveries == 1
    # The new session restored step 2 and the retried run made it step 3.
    assert final.final_ops_values["step"] == 3
    assert final.final_ops_values["w"] == pytest.approx(_w_after(3), rel=1e-5)


def test_unavailable_is_recovered_too_but_not_other_errors() -> None:
    _, train_op, _ = _model()

    class Fail(tf.train.SessionRunHook):
        errors = [tf.errors.UnavailableError(None, None, "ps down"),
                  tf.errors.InternalError(None, None, "a bug")]

        def before_run(self, run_context: tf.train.SessionRunContext) -> None:
            if self.errors:
                raise self.errors.pop(0)

    with tf.train.MonitoredSession(hooks=[Fail()]) as sess:
        with pytest.raises(tf.errors.InternalError, match="a bug"):
            sess.run(train_op)
        assert sess.recoveries == 1


def test_singular_monitored_session_does_not_recover() -> None:
    _, train_op, _ = _model()
    with tf.train.SingularMonitoredSession(hooks=[_AbortOnce()]) as sess:
        with pytest.raises(tf.errors.AbortedError):
            sess.run(train_op)


# ---------------------------------------------------------------------- Scaffold

def test_scaffold_uses_the_collections_and_copies_from_another() -> None:
    v = tf.Variable(1.0)
    init = tf.variables_initializer([v], name="my_init")
    tf.add_to_collection(tf.GraphKeys.INIT_OP, init)
    ready = tf.report_uninitialized_variables([v])
    tf.add_to_collection(tf.GraphKeys.READY_OP, ready)
    scaffold = tf.train.Scaffold().finalize()
    assert scaffold.init_op is init
    assert scaffold.ready_op is ready
    assert scaffold.saver is not None
    copy = tf.train.Scaffold(copy_from_scaffold=scaffold)
    assert copy.ready_op is ready and copy.init_op is init and copy.saver is scaffold.saver


def test_scaffold_init_fn_gets_the_scaffold_and_the_session() -> None:
    v = tf.Variable(1.0)
    seen: list[Any] = []
    scaffold = tf.train.Scaffold(init_fn=lambda sc, sess: seen.append((sc, sess.run(v))))
    with tf.train.MonitoredSession(session_creator=tf.train.ChiefSessionCreator(scaffold=scaffold)):
        pass
    assert seen == [(scaffold, 1.0)]


# ---------------------------------------------------------------------- SessionManager

class _SharedSessionManager(tf.train.SessionManager):
    """A SessionManager whose sessions all reach one live model, like sessions to a PS that kept running."""

    def __init__(self, shared: tf.Session, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shared = shared

    def _new_session(self, master: str, config: Any) -> tf.Session:
        return self.shared


def _manager_model() -> tuple[tf.Variable, Any, Any]:
    w = tf.Variable(1.0, name="w")
    step = tf.train.get_or_create_global_step()
    return w, tf.assign_add(w, 1.0), step


def test_prepare_session_initializes_when_there_is_nothing_to_restore(tmp_path: Any) -> None:
    w, _, _ = _manager_model()
    manager = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    sess = manager.prepare_session("", init_op=tf.global_variables_initializer(), saver=tf.train.Saver(),
                                   checkpoint_dir=str(tmp_path))
    assert manager.last_preparation == "initialized"
    assert sess.run(w) == 1.0
    sess.close()


def test_prepare_session_restores_the_latest_checkpoint(tmp_path: Any) -> None:
    w, bump, step = _manager_model()
    saver = tf.train.Saver()
    init = tf.global_variables_initializer()
    with tf.Session() as first:
        first.run(init)
        first.run(bump)
        saver.save(first, str(tmp_path / "model.ckpt"), global_step=1)
        first.run(bump)
        saver.save(first, str(tmp_path / "model.ckpt"), global_step=2)
    manager = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    sess = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    assert manager.last_preparation == "restored"
    assert sess.run(w) == 3.0, "restored from model.ckpt-2, not initialized"
    sess.close()


def test_prepare_session_does_not_roll_a_live_model_back(tmp_path: Any) -> None:
    w, bump, _ = _manager_model()
    saver = tf.train.Saver()
    init = tf.global_variables_initializer()
    with tf.Session() as shared:
        manager = _SharedSessionManager(shared, ready_op=tf.report_uninitialized_variables())
        sess = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        assert manager.last_preparation == "initialized"
        saver.save(sess, str(tmp_path / "model.ckpt"), global_step=0)
        sess.run(bump)
        sess.run(bump)  # w is 3 in the live model, 1 in the checkpoint

        # The chief restarts while the model lives on (as on a PS that kept running).
        again = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        assert manager.last_preparation == "live"
        assert again.run(w) == 3.0


def test_prepare_session_restores_when_part_of_the_model_was_lost(tmp_path: Any) -> None:
    w, bump, step = _manager_model()
    other = tf.Variable(5.0, name="other")
    saver = tf.train.Saver()
    init = tf.global_variables_initializer()
    with tf.Session() as shared:
        manager = _SharedSessionManager(shared, ready_op=tf.report_uninitialized_variables())
        manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        saver.save(shared, str(tmp_path / "model.ckpt"), global_step=0)
        shared.run(bump)
        # One PS restarts: ``other`` is gone, ``w`` lives on. Simulate with a fresh session
        # that has only ``w`` initialized (to its live value).
    with tf.Session() as shared:
        shared.run(w.initializer)
        shared.run(bump)
        manager = _SharedSessionManager(shared, ready_op=tf.report_uninitialized_variables())
        sess = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        assert manager.last_preparation == "restored"
        assert sess.run([w, other]) == [1.0, 5.0], "the whole model comes from one checkpoint"


def test_prepare_session_without_a_way_to_initialize_says_so() -> None:
    _manager_model()
    manager = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    with pytest.raises(RuntimeError, match="no init_op"):
        manager.prepare_session("")


def test_prepare_session_reports_an_init_op_that_leaves_variables_uninitialized() -> None:
    w, _, _ = _manager_model()
    manager = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    with pytest.raises(RuntimeError, match="did not make model ready.*global_step"):
        manager.prepare_session("", init_op=w.initializer)


def test_prepare_session_runs_the_local_init_op() -> None:
    _manager_model()
    counter = tf.Variable(7, name="counter", trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES])
    manager = tf.train.SessionManager(
        ready_op=tf.report_uninitialized_variables(),
        ready_for_local_init_op=tf.report_uninitialized_variables(tf.global_variables()),
        local_init_op=tf.local_variables_initializer())
    sess = manager.prepare_session("", init_op=tf.global_variables_initializer())
    assert sess.run(counter) == 7
    sess.close()


@pytest.mark.timeout(30)
def test_wait_for_session_returns_soon_after_another_task_initializes() -> None:
    w, _, _ = _manager_model()
    init = tf.global_variables_initializer()
    with tf.Session() as shared:
        manager = _SharedSessionManager(shared, ready_op=tf.report_uninitialized_variables())
        initializer = threading.Timer(0.3, lambda: shared.run(init))
        started = time.monotonic()
        initializer.start()
        sess = manager.wait_for_session("", max_wait_secs=20)
        waited = time.monotonic() - started
        initializer.join()
        assert sess.run(w) == 1.0
    assert 0.25 <= waited < 1.5, f"waited {waited:.2f} s for a model ready after 0.3 s"


@pytest.mark.timeout(30)
def test_wait_for_session_gives_up_after_max_wait_secs() -> None:
    _manager_model()
    manager = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    started = time.monotonic()
    with pytest.raises(tf.errors.DeadlineExceededError, match="not ready after waiting.*w, global_step"):
        manager.wait_for_session("", max_wait_secs=0.5)
    assert 0.5 <= time.monotonic() - started < 3


def test_recover_session_says_whether_it_restored(tmp_path: Any) -> None:
    w, bump, _ = _manager_model()
    saver = tf.train.Saver()
    manager = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    sess, restored = manager.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert restored is False
    sess.run(tf.global_variables_initializer())
    sess.run(bump)
    saver.save(sess, str(tmp_path / "model.ckpt"))
    sess.close()
    sess, restored = manager.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert restored is True
    assert sess.run(w) == 2.0
    sess.close()
