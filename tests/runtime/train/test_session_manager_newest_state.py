"""The chief keeps the newest state: a live model (a PS that kept running, or one that loaded its
live replica) is used as it is, unless the latest checkpoint's global step is past it (a restarted
PS loaded a replica older than the checkpoint), in which case the checkpoint is restored and the
log says why. In-process, with one long-lived session standing for the PS that holds the model."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import tensorgrid as tf


class _SharedSessionManager(tf.train.SessionManager):
    """Every session it makes is ``shared``: the model on a PS that outlives the chief's sessions."""

    def __init__(self, shared: tf.Session, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shared = shared

    def _new_session(self, master: str, config: Any) -> tf.Session:
        return self.shared


@pytest.mark.parametrize("live_step, saved_step, preparation, w", [
    (3, 7, "restored", 7.0),  # the live model is older than the checkpoint: the checkpoint wins
    (9, 7, "live", 9.0),  # the live model is newer: it is kept
    (7, 7, "live", 7.0),  # as new as the checkpoint: kept (nothing to gain by a restore)
])
def test_the_newest_of_the_live_model_and_the_checkpoint_is_kept(tmp_path: Any, caplog: Any, live_step: int,
                                                                 saved_step: int, preparation: str, w: float) -> None:
    caplog.set_level(logging.WARNING, logger="tensorgrid.train")
    step = tf.train.get_or_create_global_step()
    weight = tf.Variable(0.0, name="w")
    step_value, value = tf.placeholder(tf.int64, []), tf.placeholder(tf.float32, [])
    set_step, set_weight = tf.assign(step, step_value), tf.assign(weight, value)
    saver = tf.train.Saver()
    init = tf.global_variables_initializer()
    with tf.Session() as shared:
        manager = _SharedSessionManager(shared, ready_op=tf.report_uninitialized_variables())
        sess = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        sess.run([set_step, set_weight], {step_value: saved_step, value: float(saved_step)})
        saver.save(sess, str(tmp_path / "model.ckpt"), global_step=saved_step)
        # The PS restarts and loads a live replica of some step (w follows the step here).
        sess.run([set_step, set_weight], {step_value: live_step, value: float(live_step)})

        again = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        assert manager.last_preparation == preparation
        assert again.run(weight) == w
        said = "restoring the checkpoint, the newest" in caplog.text
        assert said == (preparation == "restored"), caplog.text
        if said:
            assert f"at global step {live_step}, the checkpoint" in caplog.text


def test_a_checkpoint_without_the_global_step_does_not_replace_the_live_model(tmp_path: Any) -> None:
    tf.train.get_or_create_global_step()
    weight = tf.Variable(5.0, name="w")
    saver = tf.train.Saver([weight])  # the global step is not saved: nothing to compare
    init = tf.global_variables_initializer()
    with tf.Session() as shared:
        manager = _SharedSessionManager(shared, ready_op=tf.report_uninitialized_variables())
        sess = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        saver.save(sess, str(tmp_path / "model.ckpt"), global_step=100)
        sess.run(tf.assign(weight, 6.0))
        again = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
        assert manager.last_preparation == "live" and again.run(weight) == 6.0
