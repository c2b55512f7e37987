"""``tf.train.Supervisor`` in one process, with TensorFlow 2.21's ``tf.compat.v1`` as the oracle:
the same TF1 code on both libraries initializes (init_op, init_fn), checkpoints to ``logdir`` on
its timer, writes summaries, restores on a second Supervisor over the same ``logdir`` (the global
step goes on), stops when asked, ends cleanly on OutOfRangeError and raises other errors after
stopping; a non-chief waits for the chief's initialization on a shared server, or gives up after
``max_wait_secs`` with TensorFlow's error class.
"""

from __future__ import annotations

import glob
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on: tensorgrid, or TF1 (the oracle)."""
    yield tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def counter_model(lib: Any) -> dict[str, Any]:
    """A global step, a variable ``v`` (1.0) with a scalar summary, and ops to step and to set ``v``."""
    step = lib.train.get_or_create_global_step()
    v = lib.Variable(1.0, name="v")
    lib.summary.scalar("v_value", v)
    return {"step": step, "v": v, "increment": lib.assign_add(step, 1), "set_v": v.assign(5.0)}


def train_for(sv: Any, sess: Any, op: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not sv.should_stop():
        sess.run(op)
        time.sleep(0.005)


def test_use_default_is_tensorflows_value(lib: Any) -> None:
    assert lib.train.Supervisor.USE_DEFAULT == 0


def test_managed_session_initializes_then_runs_init_fn(lib: Any, tmp_path: Path) -> None:
    with lib.Graph().as_default():
        model = counter_model(lib)
        sv = lib.train.Supervisor(logdir=str(tmp_path), init_fn=lambda sess: sess.run(model["set_v"]),
                                  save_model_secs=0, save_summaries_secs=0)
        assert sv.is_chief and sv.global_step is not None and sv.saver is not None
        with sv.managed_session("") as sess:
            assert float(sess.run(model["v"])) == 5.0
            assert int(sess.run(model["increment"])) == 1
        with pytest.raises(RuntimeError, match="finalized"):
            lib.constant(1.0)


def test_init_op_none_and_no_init_fn_is_refused(lib: Any) -> None:
    with lib.Graph().as_default():
        counter_model(lib)
        sv = lib.train.Supervisor(init_op=None, save_model_secs=0, save_summaries_secs=0)
        with pytest.raises(RuntimeError):
            with sv.managed_session(""):
                pass


def test_checkpoints_on_the_timer_and_a_second_supervisor_restores(lib: Any, tmp_path: Path) -> None:
    logdir = str(tmp_path)
    with lib.Graph().as_default():
        model = counter_model(lib)
        sv = lib.train.Supervisor(logdir=logdir, save_model_secs=0.5, save_summaries_secs=0,
                                  init_fn=lambda sess: sess.run(model["set_v"]))
        assert sv.save_path == os.path.join(logdir, "model.ckpt")
        with sv.managed_session("") as sess:
            train_for(sv, sess, model["increment"], 1.2)
            sv.saver.save(sess, sv.save_path, global_step=sv.global_step)
            last_step = int(sess.run(model["step"]))
    latest = lib.train.latest_checkpoint(logdir)
    assert latest == os.path.join(logdir, f"model.ckpt-{last_step}")
    # The timer's checkpoints: one at the start, then every 0.5 s (the training loop runs meanwhile).
    states = lib.train.get_checkpoint_state(logdir)
    steps = [int(p.rsplit("-", 1)[1]) for p in states.all_model_checkpoint_paths]
    assert len(steps) >= 3 and steps == sorted(set(steps)) and steps[-1] == last_step, steps

    with lib.Graph().as_default():
        model = counter_model(lib)
        sv = lib.train.Supervisor(logdir=logdir, save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session("") as sess:
            assert int(sess.run(model["step"])) == last_step
            assert float(sess.run(model["v"])) == 5.0  # restored, not initialized
            assert int(sess.run(model["increment"])) == last_step + 1


def test_summaries_are_written_with_the_global_step(lib: Any, tf1: Any, tmp_path: Path) -> None:
    with lib.Graph().as_default():
        model = counter_model(lib)
        sv = lib.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, save_summaries_secs=0.5)
        with sv.managed_session("") as sess:
            train_for(sv, sess, model["increment"], 1.3)
            sv.summary_computed(sess, sess.run(sv.summary_op))
            final_step = int(sess.run(model["step"]))
    values: dict[str, list[tuple[int, float]]] = {}
    has_graph = False
    for path in glob.glob(str(tmp_path / "events.out.tfevents.*")):
        for event in tf1.train.summary_iterator(path):
            has_graph = has_graph or event.HasField("graph_def")
            for value in event.summary.value:
                values.setdefault(value.tag, []).append((event.step, value.simple_value))
    assert has_graph
    v_steps = [step for step, _ in values["v_value"]]
    assert len(v_steps) >= 3 and v_steps == sorted(v_steps) and v_steps[-1] == final_step, values["v_value"]
    assert all(value == 1.0 for _, value in values["v_value"])
    assert len(values["global_step/sec"]) >= 2


def test_should_stop_after_request_stop(lib: Any) -> None:
    with lib.Graph().as_default():
        counter_model(lib)
        sv = lib.train.Supervisor(save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session("") as sess:
            assert not sv.should_stop()
            sv.request_stop()
            assert sv.should_stop()
            assert sess.run(sv.global_step) == 0  # the session stays usable inside the block
        # The next session starts afresh.
        with sv.managed_session(""):
            assert not sv.should_stop()


def test_out_of_range_ends_the_block_cleanly_other_errors_are_raised(lib: Any) -> None:
    with lib.Graph().as_default():
        model = counter_model(lib)
        sv = lib.train.Supervisor(save_model_secs=0, save_summaries_secs=0)
        ran_after = []
        with sv.managed_session("") as sess:
            sess.run(model["increment"])
            raise lib.errors.OutOfRangeError(None, None, "the input ran out")
        ran_after.append(True)
        assert ran_after and sv.should_stop()
        with pytest.raises(ValueError, match="a bug in the loop"):
            with sv.managed_session(""):
                raise ValueError("a bug in the loop")


def test_an_error_of_a_loop_thread_stops_training_and_is_raised_at_exit(lib: Any) -> None:
    with lib.Graph().as_default():
        counter_model(lib)
        sv = lib.train.Supervisor(save_model_secs=0, save_summaries_secs=0)
        calls = []

        def fail_on_third(tag: str) -> None:
            calls.append(tag)
            if len(calls) == 3:
                raise KeyError(tag)

        with pytest.raises(KeyError, match="looped"):
            with sv.managed_session(""):
                sv.loop(0.05, fail_on_third, args=("looped",))
                deadline = time.monotonic() + 30
                while not sv.should_stop() and time.monotonic() < deadline:
                    time.sleep(0.01)
        assert calls == ["looped"] * 3


def test_prepare_or_wait_for_session_and_stop(lib: Any, tmp_path: Path) -> None:
    with lib.Graph().as_default():
        model = counter_model(lib)
        sv = lib.train.Supervisor(logdir=str(tmp_path), save_model_secs=3600, save_summaries_secs=3600)
        sess = sv.prepare_or_wait_for_session("")
        # The checkpoint thread saves once at its start, then every save_model_secs.
        deadline = time.monotonic() + 30
        while lib.train.latest_checkpoint(str(tmp_path)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lib.train.latest_checkpoint(str(tmp_path)) == os.path.join(str(tmp_path), "model.ckpt-0")
        assert int(sess.run(model["increment"])) == 1
        assert not sv.should_stop()
        sv.stop()
        assert sv.should_stop()
        assert int(sess.run(model["increment"])) == 2  # stop() leaves the session open
        sess.close()


def test_summary_computed_needs_a_writer(lib: Any) -> None:
    with lib.Graph().as_default():
        counter_model(lib)
        sv = lib.train.Supervisor(save_model_secs=0, save_summaries_secs=0)
        assert sv.summary_writer is None
        with sv.managed_session("") as sess:
            with pytest.raises(RuntimeError, match="summary writer"):
                sv.summary_computed(sess, sess.run(sv.summary_op))


def test_a_non_chief_needs_placed_variables(lib: Any) -> None:
    with lib.Graph().as_default():
        lib.Variable(1.0, name="unplaced")
        with pytest.raises(ValueError, match="device set"):
            lib.train.Supervisor(is_chief=False)


@pytest.fixture
def local_server(lib: Any) -> Iterator[Any]:
    server = lib.train.Server.create_local_server()
    yield server
    if lib is tensorgrid:
        server.stop()


def test_a_non_chief_waits_for_the_chief_then_gives_up(lib: Any, local_server: Any) -> None:
    server = local_server
    device = "/job:localhost/task:0"

    def build(is_chief: bool) -> tuple[Any, Any]:
        graph = lib.Graph()
        with graph.as_default(), lib.device(device):
            v = lib.Variable(np.arange(3, dtype=np.float32), name="shared")
            sv = lib.train.Supervisor(is_chief=is_chief, recovery_wait_secs=0.1, save_model_secs=0,
                                      save_summaries_secs=0)
        return sv, v

    worker_sv, worker_v = build(is_chief=False)
    assert worker_sv.summary_writer is None and worker_sv.save_path is None
    with pytest.raises(lib.errors.DeadlineExceededError):
        worker_sv.prepare_or_wait_for_session(server.target, max_wait_secs=0.5)

    seen: list[Any] = []
    waiting = threading.Thread(target=lambda: seen.append(
        worker_sv.prepare_or_wait_for_session(server.target, max_wait_secs=60).run(worker_v)))
    waiting.start()
    time.sleep(0.5)
    assert waiting.is_alive() and not seen  # still waiting: nothing is initialized
    chief_sv, _ = build(is_chief=True)
    with chief_sv.managed_session(server.target):
        waiting.join(timeout=60)
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [0.0, 1.0, 2.0])
    worker_sv.stop()


def test_distribute_server_is_train_server(lib: Any) -> None:
    assert lib.distribute.Server is lib.train.Server


def test_a_looper_thread_calls_its_target_on_a_timer_until_stopped(lib: Any) -> None:
    coord = lib.train.Coordinator()
    calls: list[float] = []
    looper = lib.train.LooperThread.loop(coord, 0.05, calls.append, args=(1.0,))
    assert looper.daemon
    deadline = time.monotonic() + 30
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    coord.request_stop()
    coord.join([looper])
    assert len(calls) >= 3 and not looper.is_alive()
    with pytest.raises(ValueError, match="require that you also pass 'target'"):
        lib.train.LooperThread(lib.train.Coordinator(), 1.0, args=(1,))


def test_managed_session_runs_the_graphs_queue_runners_and_stops_them(lib: Any) -> None:
    with lib.Graph().as_default():
        counter_model(lib)
        queue = lib.FIFOQueue(4, lib.float32)
        lib.train.add_queue_runner(lib.train.QueueRunner(queue, [queue.enqueue(lib.constant(7.0))]))
        dequeue = queue.dequeue()
        sv = lib.train.Supervisor(save_model_secs=0, save_summaries_secs=0, stop_grace_secs=30)
        started = time.monotonic()
        with sv.managed_session("") as sess:
            assert [float(sess.run(dequeue)) for _ in range(6)] == [7.0] * 6
        # The enqueue thread, blocked on the full queue, was stopped: no wait for the grace period.
        assert time.monotonic() - started < 20
