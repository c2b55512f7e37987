"""``MonitoredSession.run_step_fn``: a step function runs some ops through the hooks and some
around them, and can stop the session; compared with TensorFlow's ``tf.compat.v1``."""

from __future__ import annotations

from typing import Any

import pytest

import tensorgrid


def stepping(tf: Any, stop_after: int) -> list[Any]:
    """The step functions' results; ``request_stop`` leaves the ``with`` block at once."""
    with tf.Graph().as_default():
        global_step = tf.train.get_or_create_global_step()
        side = tf.Variable(0.0)
        bump_side = tf.assign_add(side, 1.0)
        train = tf.assign_add(global_step, 1)
        results = []
        with tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(last_step=5)]) as sess:
            while not sess.should_stop():
                def step_fn(step_context: Any) -> Any:
                    side_runs = step_context.session.run(bump_side)  # around the hooks
                    if len(results) == stop_after:
                        step_context.request_stop()
                    return side_runs, step_context.run_with_hooks(train)

                results.append(sess.run_step_fn(step_fn))
        return results


@pytest.mark.parametrize("stop_after", [100, 2])
def test_step_functions_run_and_stop_as_in_tensorflow(tf1: Any, stop_after: int) -> None:
    ours = stepping(tensorgrid, stop_after)
    assert ours == stepping(tf1, stop_after)
    assert len(ours) == min(stop_after, 5)  # StopAtStepHook counts only the runs through the hooks


def test_a_step_function_with_other_arguments_is_refused() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        with tf.train.MonitoredTrainingSession() as sess:
            with pytest.raises(ValueError, match="may either have one `step_context` argument"):
                sess.run_step_fn(lambda ctx: None)
