"""The standard SessionRunHooks, driven by a real MonitoredSession on a one-variable model.

The model minimizes ``(w - 3)^2`` with plain gradient descent, so every step's loss
and the global step are known exactly.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf


def _model(lr: float = 0.1) -> tuple[tf.Variable, Any, Any, Any]:
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(0.0, name="w")
    loss = tf.square(w - 3.0, name="loss")
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step=step)
    return w, loss, train_op, step


def _run_until_stop(sess: Any, train_op: Any, limit: int = 1000) -> int:
    runs = 0
    while not sess.should_stop():
        sess.run(train_op)
        runs += 1
        assert runs < limit, "the hooks never asked to stop"
    return runs


def _checkpoint_steps(directory: Any) -> list[int]:
    return sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(directory)
                  if name.startswith("model.ckpt-") and name.endswith(".index"))


class _Recorder(tf.train.SessionRunHook):
    """Records every callback, in order, into a shared list."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def begin(self) -> None:
        self.calls.append(f"{self.name}.begin")

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.calls.append(f"{self.name}.after_create_session")

    def before_run(self, run_context: tf.train.SessionRunContext) -> None:
        self.calls.append(f"{self.name}.before_run")

    def after_run(self, run_context: tf.train.SessionRunContext, run_values: tf.train.SessionRunValues) -> None:
        self.calls.append(f"{self.name}.after_run")

    def end(self, session: Any) -> None:
        self.calls.append(f"{self.name}.end")


# ---------------------------------------------------------------------- StopAtStepHook

def test_stop_at_step_hook_with_last_step() -> None:
    _, _, train_op, step = _model()
    final = tf.train.FinalOpsHook(step)
    with tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=7), final]) as sess:
        runs = _run_until_stop(sess, train_op)
    assert runs == 7
    assert final.final_ops_values == 7


def test_stop_at_step_hook_with_num_steps_counts_from_the_current_step() -> None:
    _, _, train_op, step = _model()
    scaffold = tf.train.Scaffold(init_fn=lambda scaffold, sess: step.load(10, sess))
    final = tf.train.FinalOpsHook(step)
    with tf.train.MonitoredSession(
        session_creator=tf.train.ChiefSessionCreator(scaffold=scaffold),
        hooks=[tf.train.StopAtStepHook(num_steps=4), final],
    ) as sess:
        runs = _run_until_stop(sess, train_op)
    assert runs == 4
    assert final.final_ops_values == 14


def test_stop_at_step_hook_stops_even_when_the_step_jumps_past_last_step() -> None:
    step = tf.train.get_or_create_global_step()
    jump = tf.assign_add(step, 5)
    final = tf.train.FinalOpsHook(step)
    with tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=12), final]) as sess:
        runs = _run_until_stop(sess, jump)
    assert runs == 3
    assert final.final_ops_values == 15


def test_stop_at_step_hook_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="Exactly one of num_steps and last_step"):
        tf.train.StopAtStepHook()
    with pytest.raises(ValueError, match="Exactly one of num_steps and last_step"):
        tf.train.StopAtStepHook(num_steps=1, last_step=2)
    with pytest.raises(ValueError, match="non-negative"):
        tf.train.StopAtStepHook(num_steps=-1)


def test_stop_at_step_hook_needs_a_global_step() -> None:
    tf.Variable(1.0)
    with pytest.raises(RuntimeError, match="Global step should be created"):
        tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=1)])


# ---------------------------------------------------------------------- NanTensorHook

def _nan_model() -> tuple[Any, Any, Any]:
    step = tf.train.get_or_create_global_step()
    bad = tf.placeholder(tf.bool, [])
    loss = tf.where(bad, tf.constant(np.nan, tf.float32), tf.constant(1.0))
    return loss, tf.assign_add(step, 1), bad


def test_nan_tensor_hook_fails_on_nan_loss() -> None:
    loss, train_op, bad = _nan_model()
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss)]) as sess:
        sess.run(train_op, {bad: False})
        with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss during training"):
            sess.run(train_op, {bad: True})


def test_nan_tensor_hook_can_stop_instead_of_failing(caplog: pytest.LogCaptureFixture) -> None:
    loss, train_op, bad = _nan_model()
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss, fail_on_nan_loss=False)]) as sess:
        sess.run(train_op, {bad: False})
        assert not sess.should_stop()
        with caplog.at_level(logging.WARNING):
            sess.run(train_op, {bad: True})
        assert sess.should_stop()
    assert "NaN" in caplog.text


# ---------------------------------------------------------------------- CheckpointSaverHook

def test_checkpoint_saver_hook_saves_at_start_every_n_steps_and_at_end(tmp_path: Any) -> None:
    w, _, train_op, step = _model()
    saver = tf.train.Saver(max_to_keep=None)
    final = tf.train.FinalOpsHook(w)
    hooks = [tf.train.CheckpointSaverHook(str(tmp_path), save_steps=3, saver=saver),
             tf.train.StopAtStepHook(last_step=7), final]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        assert _checkpoint_steps(tmp_path) == [0], "a checkpoint is written when the session starts"
        _run_until_stop(sess, train_op)
    trained_w = final.final_ops_values
    assert _checkpoint_steps(tmp_path) == [0, 3, 6, 7]
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-7")
    reader = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-7"))
    assert reader.get_tensor("w") == pytest.approx(trained_w)
    assert reader.get_tensor("global_step") == 7


def test_checkpoint_saver_hook_does_not_save_twice_at_the_end(tmp_path: Any) -> None:
    _, _, train_op, _ = _model()
    saver = tf.train.Saver(max_to_keep=None)
    hooks = [tf.train.CheckpointSaverHook(str(tmp_path), save_steps=2, saver=saver),
             tf.train.StopAtStepHook(last_step=4)]
    saved: list[int] = []

    class Listener(tf.train.CheckpointSaverListener):
        def after_save(self, session: Any, global_step_value: int) -> None:
            saved.append(global_step_value)

    hooks[0]._listeners.append(Listener())
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        _run_until_stop(sess, train_op)
    assert saved == [0, 2, 4]
    assert _checkpoint_steps(tmp_path) == [0, 2, 4]


def test_checkpoint_saver_hook_uses_the_saver_of_the_collection(tmp_path: Any) -> None:
    _, _, train_op, _ = _model()
    saver = tf.train.Saver(max_to_keep=2)
    tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
    hooks = [tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1), tf.train.StopAtStepHook(last_step=5)]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        _run_until_stop(sess, train_op)
    assert _checkpoint_steps(tmp_path) == [4, 5], "the collection's Saver (max_to_keep=2) did the saving"
    assert saver.last_checkpoints == [str(tmp_path / "model.ckpt-4"), str(tmp_path / "model.ckpt-5")]


def test_checkpoint_saver_listener_can_stop_training(tmp_path: Any) -> None:
    _, _, train_op, step = _model()

    class StopAfterStepTwo(tf.train.CheckpointSaverListener):
        def after_save(self, session: Any, global_step_value: int) -> bool:
            return global_step_value >= 2

    hooks = [tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1, saver=tf.train.Saver(),
                                          listeners=[StopAfterStepTwo()])]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        assert _run_until_stop(sess, train_op) == 2


def test_checkpoint_saver_hook_arguments_are_checked(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="Exactly one of every_secs and every_steps"):
        tf.train.CheckpointSaverHook(str(tmp_path))
    with pytest.raises(ValueError, match="Exactly one of every_secs and every_steps"):
        tf.train.CheckpointSaverHook(str(tmp_path), save_secs=1, save_steps=1)


def test_checkpoint_saver_hook_without_a_saver_says_so(tmp_path: Any) -> None:
    tf.train.get_or_create_global_step()
    hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1)
    hook.begin()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(RuntimeError, match="exactly one Saver.*found 0"):
            hook.after_create_session(sess, None)


# ---------------------------------------------------------------------- LoggingTensorHook

def _train_log(caplog: pytest.LogCaptureFixture, steps: int, **hook_args: Any) -> list[str]:
    w, loss, train_op, step = _model()
    hook_args.setdefault("tensors", {"step": step, "loss": loss})
    hooks = [tf.train.LoggingTensorHook(**hook_args), tf.train.StopAtStepHook(last_step=steps)]
    with caplog.at_level(logging.INFO, logger="tensorgrid.train"):
        with tf.train.MonitoredSession(hooks=hooks) as sess:
            _run_until_stop(sess, train_op)
    return [r.getMessage() for r in caplog.records if r.name == "tensorgrid.train"]


# w after k steps is 3 - 3 * 0.8^k, so the loss of the run at iteration k is 9 * 0.64^k.

def test_logging_tensor_hook_logs_every_n_iterations(caplog: pytest.LogCaptureFixture) -> None:
    lines = _train_log(caplog, 7, tensors={"loss": "loss:0"}, every_n_iter=3)
    assert [line.split(" = ")[0] for line in lines] == ["loss", "loss", "loss"]
    logged = [float(line.split(" = ")[1]) for line in lines]
    np.testing.assert_allclose(logged, [9.0, 9 * 0.64 ** 3, 9 * 0.64 ** 6], rtol=1e-5)


def test_logging_tensor_hook_with_a_formatter_and_at_end(caplog: pytest.LogCaptureFixture) -> None:
    lines = _train_log(caplog, 4, every_n_iter=10, at_end=True,
                       formatter=lambda values: f"loss={values['loss']:.4f}")
    assert lines == ["loss=9.0000", f"loss={9 * 0.64 ** 4:.4f}"]


def test_logging_tensor_hook_only_at_end(caplog: pytest.LogCaptureFixture) -> None:
    lines = _train_log(caplog, 3, at_end=True, formatter=lambda values: f"final step {values['step']}")
    assert lines == ["final step 3"]


def test_logging_tensor_hook_accepts_tensor_names(caplog: pytest.LogCaptureFixture) -> None:
    lines = _train_log(caplog, 2, tensors=["loss:0", "loss"], every_n_iter=1,
                       formatter=lambda values: f"{values['loss:0']:.2f} {values['loss']:.2f}")
    assert lines == ["9.00 9.00", "5.76 5.76"]


def test_logging_tensor_hook_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="Exactly one of every_n_iter and every_n_secs"):
        tf.train.LoggingTensorHook({"x": tf.constant(1)})
    with pytest.raises(ValueError, match="Exactly one of every_n_iter and every_n_secs"):
        tf.train.LoggingTensorHook({"x": tf.constant(1)}, every_n_iter=1, every_n_secs=1)


# ---------------------------------------------------------------------- StepCounterHook, FinalOpsHook, FeedFnHook

def test_step_counter_hook_logs_the_step_rate(caplog: pytest.LogCaptureFixture) -> None:
    _, _, train_op, _ = _model()
    counter = tf.train.StepCounterHook(every_n_steps=2)
    with caplog.at_level(logging.INFO, logger="tensorgrid.train"):
        with tf.train.MonitoredSession(hooks=[counter, tf.train.StopAtStepHook(last_step=6)]) as sess:
            _run_until_stop(sess, train_op)
    rates = [r.getMessage() for r in caplog.records if "global_step/sec" in r.getMessage()]
    # Three triggers in six steps; a rate needs two of them.
    assert len(rates) == 2
    assert counter.last_rate is not None and counter.last_rate > 0


def test_final_ops_hook_keeps_the_values_at_the_end() -> None:
    w, loss, train_op, _ = _model()
    final = tf.train.FinalOpsHook({"w": w, "loss": loss})
    with tf.train.MonitoredSession(hooks=[final, tf.train.StopAtStepHook(last_step=2)]) as sess:
        _run_until_stop(sess, train_op)
        assert final.final_ops_values is None, "final ops run only when the session ends"
    assert final.final_ops_values["w"] == pytest.approx(1.08)
    assert final.final_ops_values["loss"] == pytest.approx((1.08 - 3.0) ** 2)


def test_final_ops_hook_feeds_its_feed_dict() -> None:
    x = tf.placeholder(tf.float32, [])
    final = tf.train.FinalOpsHook(x * 2.0, final_ops_feed_dict={x: 21.0})
    with tf.train.MonitoredSession(hooks=[final]):
        pass
    assert final.final_ops_values == 42.0


def test_feed_fn_hook_feeds_every_run() -> None:
    x = tf.placeholder(tf.float32, [])
    total = tf.Variable(0.0)
    add = tf.assign_add(total, x)
    values = iter([1.0, 2.0, 4.0])
    final = tf.train.FinalOpsHook(total)
    with tf.train.MonitoredSession(hooks=[tf.train.FeedFnHook(lambda: {x: next(values)}), final]) as sess:
        for _ in range(3):
            sess.run(add)
    assert final.final_ops_values == 7.0


def test_feed_fn_hook_and_user_feeding_the_same_tensor_is_an_error() -> None:
    x = tf.placeholder(tf.float32, [])
    y = x + 1.0
    with tf.train.MonitoredSession(hooks=[tf.train.FeedFnHook(lambda: {x: 1.0})]) as sess:
        with pytest.raises(RuntimeError, match="Same tensor is fed by a SessionRunHook and user"):
            sess.run(y, {x: 2.0})


# ---------------------------------------------------------------------- the hook protocol

def test_hooks_are_called_in_order_around_each_run() -> None:
    _, _, train_op, _ = _model()
    calls: list[str] = []
    hooks = [_Recorder("a", calls), _Recorder("b", calls)]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        assert calls == ["a.begin", "b.begin", "a.after_create_session", "b.after_create_session"]
        del calls[:]
        sess.run(train_op)
        assert calls == ["a.before_run", "b.before_run", "a.after_run", "b.after_run"]
        del calls[:]
    assert calls == ["a.end", "b.end"]


def test_hook_fetches_and_feeds_are_merged_into_the_run() -> None:
    x = tf.placeholder(tf.float32, [])
    doubled = x * 2.0
    plus_one = x + 1.0
    seen: list[Any] = []

    class FeedAndFetch(tf.train.SessionRunHook):
        def before_run(self, run_context: tf.train.SessionRunContext) -> tf.train.SessionRunArgs:
            seen.append(run_context.original_args.fetches)
            return tf.train.SessionRunArgs({"d": doubled}, feed_dict={x: 5.0})

        def after_run(self, run_context: tf.train.SessionRunContext,
                      run_values: tf.train.SessionRunValues) -> None:
            seen.append(run_values.results)

    with tf.train.MonitoredSession(hooks=[FeedAndFetch()]) as sess:
        assert sess.run(plus_one) == 6.0
    assert seen == [plus_one, {"d": 10.0}]


def test_a_hook_can_request_a_stop() -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)

    class StopAtThirdRun(tf.train.SessionRunHook):
        runs = 0

        def after_run(self, run_context: tf.train.SessionRunContext,
                      run_values: tf.train.SessionRunValues) -> None:
            self.runs += 1
            if self.runs == 3:
                run_context.request_stop()

    with tf.train.MonitoredSession(hooks=[StopAtThirdRun()]) as sess:
        assert _run_until_stop(sess, inc) == 3
        with pytest.raises(RuntimeError, match="Run called even after should_stop requested"):
            sess.run(inc)


def test_global_step_waiter_hook_returns_once_the_step_is_reached() -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)
    with tf.train.MonitoredSession(hooks=[tf.train.GlobalStepWaiterHook(0)]) as sess:
        assert sess.run(inc) == 1


def test_second_or_step_timer() -> None:
    timer = tf.train.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(0)
    timer.update_last_triggered_step(0)
    assert not timer.should_trigger_for_step(0)
    assert not timer.should_trigger_for_step(2)
    assert timer.should_trigger_for_step(3)
    assert timer.last_triggered_step() == 0
    with pytest.raises(ValueError, match="positive"):
        tf.train.SecondOrStepTimer(every_steps=0)


def test_checkpoint_saver_hook_every_n_seconds_saves_at_start_and_end(tmp_path: Any) -> None:
    _, _, train_op, _ = _model()
    hooks = [tf.train.CheckpointSaverHook(str(tmp_path), save_secs=3600, saver=tf.train.Saver()),
             tf.train.StopAtStepHook(last_step=5)]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        _run_until_stop(sess, train_op)
    assert _checkpoint_steps(tmp_path) == [0, 5]
