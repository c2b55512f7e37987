"""FIFOQueue, ConditionalAccumulator and report_uninitialized_variables, run in a real session.

Blocking behaviour is checked with real threads: a dequeue (or take_grad) started in
one thread must wait until another thread supplies the data, and closing must wake
waiters with the error TensorFlow raises.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

pytestmark = pytest.mark.gpu_node


class _Background:
    """Runs ``fn`` in a thread and keeps its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._fn = fn
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as e:  # noqa: BLE001 - inspected by the test
            self.error = e

    def finished(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()


# ---------------------------------------------------------------------- FIFOQueue

def test_fifo_queue_returns_elements_in_order(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.float32, shapes=())
    x = tf.placeholder(tf.float32, [])
    enqueue = q.enqueue(x)
    dequeue = q.dequeue()
    for v in (1.0, 2.0, 3.0):
        session.run(enqueue, {x: v})
    assert session.run(q.size()) == 3
    assert [session.run(dequeue) for _ in range(3)] == [1.0, 2.0, 3.0]
    assert session.run(q.size()) == 0


def test_enqueue_many_and_dequeue_many_with_two_components(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, [tf.int32, tf.float32], shapes=[[], [2]])
    session.run(q.enqueue_many(([1, 2, 3], [[1.0, 1.5], [2.0, 2.5], [3.0, 3.5]])))
    assert session.run(q.size()) == 3
    ints, floats = session.run(q.dequeue_many(2))
    np.testing.assert_array_equal(ints, [1, 2])
    np.testing.assert_array_equal(floats, [[1.0, 1.5], [2.0, 2.5]])
    last_int, last_floats = session.run(q.dequeue())
    assert last_int == 3
    np.testing.assert_array_equal(last_floats, [3.0, 3.5])


def test_dequeue_many_static_shape_has_the_batch_dimension() -> None:
    q = tf.FIFOQueue(10, tf.float32, shapes=[[3]])
    assert q.dequeue_many(4).shape.as_list() == [4, 3]
    assert q.dequeue().shape.as_list() == [3]


def test_enqueue_of_wrong_shape_is_rejected_when_building() -> None:
    q = tf.FIFOQueue(10, tf.float32, shapes=[[2]])
    with pytest.raises(ValueError, match="shape"):
        q.enqueue(tf.constant([1.0, 2.0, 3.0]))


def test_enqueue_with_wrong_number_of_components_is_rejected() -> None:
    q = tf.FIFOQueue(10, [tf.float32, tf.int32])
    with pytest.raises(ValueError, match="2 components, got 1"):
        q.enqueue(1.0)


@pytest.mark.timeout(30)
def test_dequeue_blocks_until_another_thread_enqueues(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    enqueue = q.enqueue(7)
    dequeue = q.dequeue()
    waiter = _Background(lambda: session.run(dequeue))
    assert not waiter.finished(0.3), "dequeue on an empty queue returned"
    session.run(enqueue)
    assert waiter.finished(5)
    assert waiter.error is None
    assert waiter.result == 7


@pytest.mark.timeout(30)
def test_dequeue_many_waits_for_enough_elements(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    x = tf.placeholder(tf.int32, [])
    enqueue = q.enqueue(x)
    dequeue_three = q.dequeue_many(3)
    waiter = _Background(lambda: session.run(dequeue_three))
    session.run(enqueue, {x: 1})
    session.run(enqueue, {x: 2})
    assert not waiter.finished(0.3), "dequeue_many(3) returned with only 2 elements"
    session.run(enqueue, {x: 3})
    assert waiter.finished(5)
    np.testing.assert_array_equal(waiter.result, [1, 2, 3])


def test_closed_empty_queue_raises_out_of_range_naming_the_queue(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.float32, shapes=(), name="input_q")
    session.run(q.close())
    with pytest.raises(tf.errors.OutOfRangeError, match="input_q.*closed.*insufficient elements"):
        session.run(q.dequeue())


def test_closed_queue_still_serves_remaining_elements_then_fails(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    session.run(q.enqueue_many(([1, 2, 3],)))
    session.run(q.close())
    np.testing.assert_array_equal(session.run(q.dequeue_many(2)), [1, 2])
    with pytest.raises(tf.errors.OutOfRangeError, match=r"requested 2, current size 1"):
        session.run(q.dequeue_many(2))
    assert session.run(q.dequeue()) == 3


def test_enqueue_to_closed_queue_is_cancelled(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    session.run(q.close())
    with pytest.raises(tf.errors.CancelledError, match="closed"):
        session.run(q.enqueue(1))


@pytest.mark.timeout(30)
def test_close_wakes_a_blocked_dequeue_with_out_of_range(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    dequeue = q.dequeue()
    close = q.close()
    waiter = _Background(lambda: session.run(dequeue))
    assert not waiter.finished(0.2)
    session.run(close)
    assert waiter.finished(5)
    assert isinstance(waiter.error, tf.errors.OutOfRangeError)


@pytest.mark.timeout(30)
def test_bounded_queue_blocks_enqueue_until_a_dequeue_makes_room(session: tf.Session) -> None:
    q = tf.FIFOQueue(2, tf.int32, shapes=())
    x = tf.placeholder(tf.int32, [])
    enqueue = q.enqueue(x)
    dequeue = q.dequeue()
    session.run(enqueue, {x: 1})
    session.run(enqueue, {x: 2})
    producer = _Background(lambda: session.run(enqueue, {x: 3}))
    assert not producer.finished(0.3), "enqueue into a full queue returned"
    assert session.run(q.size()) == 2
    assert session.run(dequeue) == 1
    assert producer.finished(5)
    assert producer.error is None
    assert [session.run(dequeue), session.run(dequeue)] == [2, 3]


@pytest.mark.timeout(30)
def test_batches_larger_than_the_capacity_move_one_element_at_a_time(session: tf.Session) -> None:
    q = tf.FIFOQueue(2, tf.int32, shapes=())
    enqueue_five = q.enqueue_many(([1, 2, 3, 4, 5],))
    dequeue_one = q.dequeue()
    dequeue_four = q.dequeue_many(4)
    producer = _Background(lambda: session.run(enqueue_five))
    assert not producer.finished(0.3), "enqueue_many overfilled a bounded queue"
    assert session.run(q.size()) == 2, "enqueue_many fills the free room before it blocks"
    assert session.run(dequeue_one) == 1
    np.testing.assert_array_equal(session.run(dequeue_four), [2, 3, 4, 5])
    assert producer.finished(5)
    assert producer.error is None


@pytest.mark.timeout(30)
def test_dequeue_many_interrupted_by_close_puts_its_partial_batch_back(session: tf.Session) -> None:
    q = tf.FIFOQueue(5, tf.int32, shapes=())
    dequeue_three = q.dequeue_many(3)
    waiter = _Background(lambda: session.run(dequeue_three))
    session.run(q.enqueue_many(([1, 2],)))
    assert not waiter.finished(0.3)
    session.run(q.close())
    assert waiter.finished(5)
    assert isinstance(waiter.error, tf.errors.OutOfRangeError)
    np.testing.assert_array_equal(session.run(q.dequeue_many(2)), [1, 2])


@pytest.mark.timeout(30)
def test_close_with_cancel_pending_enqueues_fails_the_blocked_enqueue(session: tf.Session) -> None:
    q = tf.FIFOQueue(1, tf.int32, shapes=())
    session.run(q.enqueue(1))
    blocked = q.enqueue(2)
    cancel = q.close(cancel_pending_enqueues=True)
    producer = _Background(lambda: session.run(blocked))
    assert not producer.finished(0.3)
    session.run(cancel)
    assert producer.finished(5)
    assert isinstance(producer.error, tf.errors.CancelledError)
    assert session.run(q.dequeue()) == 1, "an element enqueued before the close must stay"
    with pytest.raises(tf.errors.OutOfRangeError):
        session.run(q.dequeue())


@pytest.mark.timeout(30)
def test_close_without_cancel_lets_pending_enqueues_finish(session: tf.Session) -> None:
    q = tf.FIFOQueue(1, tf.int32, shapes=())
    session.run(q.enqueue(1))
    pending = q.enqueue(2)
    producer = _Background(lambda: session.run(pending))
    assert not producer.finished(0.3)
    session.run(q.close())
    assert session.run(q.dequeue()) == 1
    assert producer.finished(5)
    assert producer.error is None
    assert session.run(q.dequeue()) == 2


@pytest.mark.timeout(30)
def test_closing_the_session_wakes_a_blocked_dequeue() -> None:
    q = tf.FIFOQueue(1, tf.int32, shapes=())
    dequeue = q.dequeue()
    sess = tf.Session()
    waiter = _Background(lambda: sess.run(dequeue))
    assert not waiter.finished(0.2)
    sess.close()
    assert waiter.finished(5)
    assert isinstance(waiter.error, (tf.errors.CancelledError, tf.errors.OutOfRangeError))


def test_queues_with_the_same_shared_name_are_one_queue(session: tf.Session) -> None:
    a = tf.FIFOQueue(10, tf.int32, shapes=(), shared_name="shared_q", name="a")
    b = tf.FIFOQueue(10, tf.int32, shapes=(), shared_name="shared_q", name="b")
    session.run(a.enqueue(5))
    assert session.run(b.dequeue()) == 5


def test_each_session_has_its_own_queue() -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    enqueue = q.enqueue(1)
    size = q.size()
    with tf.Session() as first, tf.Session() as second:
        first.run(enqueue)
        assert first.run(size) == 1
        assert second.run(size) == 0


# ---------------------------------------------------------------------- ConditionalAccumulator

def _accumulator(shape: Any = (2,)) -> tuple[tf.ConditionalAccumulator, Any, Any, Any]:
    acc = tf.ConditionalAccumulator(tf.float32, shape=shape)
    grad = tf.placeholder(tf.float32, shape)
    step = tf.placeholder(tf.int64, [])
    apply = acc.apply_grad(grad, local_step=step)
    return acc, grad, step, apply


def test_take_grad_returns_the_mean_of_applied_gradients(session: tf.Session) -> None:
    acc, grad, step, apply = _accumulator()
    num = acc.num_accumulated()
    for g in ([1.0, 2.0], [3.0, 6.0], [5.0, 1.0]):
        session.run(apply, {grad: g, step: 0})
    assert session.run(num) == 3
    np.testing.assert_allclose(session.run(acc.take_grad(3)), [3.0, 3.0])
    assert session.run(num) == 0, "take_grad must reset the accumulator"


def test_sum_reduction_adds_gradients(session: tf.Session) -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[], reduction_type="SUM")
    session.run(acc.apply_grad(2.0))
    session.run(acc.apply_grad(3.0))
    assert session.run(acc.take_grad(2)) == 5.0


def test_unknown_reduction_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="MEAN"):
        tf.ConditionalAccumulator(tf.float32, shape=[], reduction_type="MAX")


def test_take_grad_advances_the_accumulator_step_and_drops_stale_gradients(session: tf.Session) -> None:
    acc, grad, step, apply = _accumulator()
    num = acc.num_accumulated()
    session.run(apply, {grad: [1.0, 1.0], step: 0})
    session.run(acc.take_grad(1))
    # The accumulator is now at step 1: a gradient computed at step 0 is stale.
    session.run(apply, {grad: [100.0, 100.0], step: 0})
    assert session.run(num) == 0
    session.run(apply, {grad: [2.0, 4.0], step: 1})
    session.run(apply, {grad: [4.0, 8.0], step: 5})
    assert session.run(num) == 2
    np.testing.assert_allclose(session.run(acc.take_grad(2)), [3.0, 6.0])


def test_set_global_step_drops_older_gradients(session: tf.Session) -> None:
    acc, grad, step, apply = _accumulator()
    num = acc.num_accumulated()
    session.run(acc.set_global_step(10))
    session.run(apply, {grad: [1.0, 1.0], step: 9})
    assert session.run(num) == 0
    session.run(apply, {grad: [1.0, 1.0], step: 10})
    assert session.run(num) == 1


@pytest.mark.timeout(30)
def test_take_grad_blocks_until_num_required_gradients_arrive(session: tf.Session) -> None:
    acc, grad, step, apply = _accumulator()
    take = acc.take_grad(3)
    waiter = _Background(lambda: session.run(take))
    session.run(apply, {grad: [3.0, 0.0], step: 0})
    session.run(apply, {grad: [0.0, 3.0], step: 0})
    assert not waiter.finished(0.3), "take_grad(3) returned after 2 gradients"
    session.run(apply, {grad: [3.0, 3.0], step: 0})
    assert waiter.finished(5)
    assert waiter.error is None
    np.testing.assert_allclose(waiter.result, [2.0, 2.0])


@pytest.mark.timeout(30)
def test_concurrent_appliers_are_all_counted(session: tf.Session) -> None:
    acc, grad, step, apply = _accumulator()
    threads = [threading.Thread(target=lambda i=i: session.run(apply, {grad: [float(i), 1.0], step: 0}))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    np.testing.assert_allclose(session.run(acc.take_grad(8)), [3.5, 1.0])


def test_gradient_of_the_wrong_shape_is_rejected(session: tf.Session) -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
    with pytest.raises(ValueError, match=r"shape \(2,\).*\(3,\)"):
        acc.apply_grad(tf.constant([1.0, 2.0, 3.0]))
    fed = tf.placeholder(tf.float32, None)
    apply = acc.apply_grad(fed)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expected \[2\], got \[3\]"):
        session.run(apply, {fed: [1.0, 2.0, 3.0]})


def test_take_grad_needs_a_positive_count(session: tf.Session) -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[])
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_required must be positive"):
        session.run(acc.take_grad(0))


# ---------------------------------------------------------------------- report_uninitialized_variables

def test_report_uninitialized_variables_names_the_uninitialized_ones(session: tf.Session) -> None:
    a = tf.Variable(1.0, name="a")
    b = tf.Variable([1, 2], name="b")
    local = tf.Variable(0, name="local", trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES])
    report = tf.report_uninitialized_variables()
    names = session.run(report)
    assert sorted(n.decode() if isinstance(n, bytes) else n for n in names) == ["a", "b", "local"]
    session.run(a.initializer)
    assert [n.decode() if isinstance(n, bytes) else n for n in session.run(report)] == ["b", "local"]
    session.run([b.initializer, local.initializer])
    names = session.run(report)
    assert len(names) == 0
    assert names.shape == (0,)


def test_report_uninitialized_variables_of_a_var_list(session: tf.Session) -> None:
    a = tf.Variable(1.0, name="a")
    tf.Variable(2.0, name="b")
    report = tf.report_uninitialized_variables([a])
    assert [n.decode() if isinstance(n, bytes) else n for n in session.run(report)] == ["a"]
    session.run(a.initializer)
    assert len(session.run(report)) == 0


def test_report_uninitialized_variables_with_no_variables_is_empty(session: tf.Session) -> None:
    report = tf.report_uninitialized_variables()
    assert len(session.run(report)) == 0


# ---------------------------------------------------------------------- Coordinator

@pytest.mark.timeout(30)
def test_coordinator_join_reraises_the_exception_that_stopped_the_threads() -> None:
    coord = tf.train.Coordinator()

    def worker(fail: bool) -> None:
        with coord.stop_on_exception():
            if fail:
                raise ValueError("worker 1 broke")
            while not coord.should_stop():
                time.sleep(0.01)

    threads = [threading.Thread(target=worker, args=(i == 1,)) for i in range(3)]
    for t in threads:
        t.start()
    with pytest.raises(ValueError, match="worker 1 broke"):
        coord.join(threads, stop_grace_period_secs=5)
    assert coord.joined
    assert not any(t.is_alive() for t in threads)


def test_coordinator_keeps_only_the_first_exception() -> None:
    coord = tf.train.Coordinator()
    coord.request_stop(ValueError("first"))
    coord.request_stop(KeyError("second"))
    with pytest.raises(ValueError, match="first"):
        coord.join([])


def test_coordinator_ignores_errors_raised_after_a_clean_stop() -> None:
    coord = tf.train.Coordinator()
    coord.request_stop()
    coord.request_stop(ValueError("shutting down"))
    coord.join([])


def test_coordinator_clean_stop_exception_types() -> None:
    coord = tf.train.Coordinator()
    coord.request_stop(tf.errors.OutOfRangeError(None, None, "input exhausted"))
    assert coord.should_stop()
    coord.join([])

    strict = tf.train.Coordinator(clean_stop_exception_types=[])
    strict.request_stop(tf.errors.OutOfRangeError(None, None, "input exhausted"))
    with pytest.raises(tf.errors.OutOfRangeError):
        strict.join([])

    custom = tf.train.Coordinator(clean_stop_exception_types=[StopIteration])
    with custom.stop_on_exception():
        raise StopIteration
    custom.join([])


def test_coordinator_accepts_exc_info_tuples_and_can_be_cleared() -> None:
    coord = tf.train.Coordinator()
    try:
        raise RuntimeError("from exc_info")
    except RuntimeError:
        import sys

        coord.request_stop(sys.exc_info())
    with pytest.raises(RuntimeError, match="from exc_info"):
        coord.raise_requested_exception()
    coord.clear_stop()
    assert not coord.should_stop()
    coord.raise_requested_exception()


@pytest.mark.timeout(30)
def test_coordinator_wait_for_stop_and_join_of_registered_threads() -> None:
    coord = tf.train.Coordinator()
    assert coord.wait_for_stop(0.05) is False
    thread = threading.Thread(target=coord.wait_for_stop)
    coord.register_thread(thread)
    thread.start()
    threading.Timer(0.1, coord.request_stop).start()
    coord.join(stop_grace_period_secs=5)
    assert not thread.is_alive()


@pytest.mark.timeout(30)
def test_coordinator_join_reports_threads_that_ignore_the_stop() -> None:
    coord = tf.train.Coordinator()
    release = threading.Event()
    stubborn = threading.Thread(target=release.wait, name="stubborn", daemon=True)
    stubborn.start()
    coord.request_stop()
    try:
        with pytest.raises(RuntimeError, match="threads still running: stubborn"):
            coord.join([stubborn], stop_grace_period_secs=0.1)
        coord.join([stubborn], stop_grace_period_secs=0.1, ignore_live_threads=True)
    finally:
        release.set()


# ---------------------------------------------------------------------- QueueRunner

@pytest.mark.timeout(30)
def test_queue_runner_fills_the_queue_until_the_coordinator_stops_it(session: tf.Session) -> None:
    q = tf.FIFOQueue(3, tf.int32, shapes=())
    counter = tf.Variable(0)
    runner = tf.train.QueueRunner(q, [q.enqueue(tf.assign_add(counter, 1))])
    take = q.dequeue_many(5)
    session.run(counter.initializer)
    coord = tf.train.Coordinator()
    threads = runner.create_threads(session, coord=coord, start=True)
    np.testing.assert_array_equal(session.run(take), [1, 2, 3, 4, 5])
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5)
    assert not any(t.is_alive() for t in threads)
    assert runner.exceptions_raised == []


@pytest.mark.timeout(30)
def test_queue_runner_closes_its_queue_when_the_input_runs_out(session: tf.Session) -> None:
    source = tf.FIFOQueue(10, tf.int32, shapes=(), name="source")
    batches = tf.FIFOQueue(10, tf.int32, shapes=(), name="batches")
    fill = source.enqueue_many(([1, 2, 3, 4, 5],))
    runner = tf.train.QueueRunner(batches, [batches.enqueue(source.dequeue() * 10),
                                            batches.enqueue(source.dequeue() * 10)])
    session.run(fill)
    session.run(source.close())
    coord = tf.train.Coordinator()
    threads = runner.create_threads(session, coord=coord, start=True)
    take = batches.dequeue()
    taken = []
    with pytest.raises(tf.errors.OutOfRangeError, match="batches"):
        while True:
            taken.append(int(session.run(take)))
    assert sorted(taken) == [10, 20, 30, 40, 50], "the queue was closed only after both threads ended"
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5)


@pytest.mark.timeout(30)
def test_queue_runner_reports_errors_to_the_coordinator(session: tf.Session) -> None:
    q = tf.FIFOQueue(3, tf.float32, shapes=())
    fed = tf.placeholder_with_default(tf.constant([1.0, 2.0]), [None])
    runner = tf.train.QueueRunner(q, [q.enqueue(tf.reshape(fed, []))])
    coord = tf.train.Coordinator()
    threads = runner.create_threads(session, coord=coord, start=True)
    assert coord.wait_for_stop(10)
    with pytest.raises(tf.errors.InvalidArgumentError):
        coord.join(threads, stop_grace_period_secs=5)


@pytest.mark.timeout(30)
def test_queue_runner_stop_cancels_an_enqueue_blocked_on_a_full_queue(session: tf.Session) -> None:
    q = tf.FIFOQueue(1, tf.int32, shapes=())
    runner = tf.train.QueueRunner(q, [q.enqueue(1)])
    coord = tf.train.Coordinator()
    threads = runner.create_threads(session, coord=coord, start=True)
    deadline = time.monotonic() + 5
    while session.run(q.size()) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5)
    assert not any(t.is_alive() for t in threads)


@pytest.mark.timeout(30)
def test_start_queue_runners_starts_the_collection_and_not_twice(session: tf.Session) -> None:
    q = tf.FIFOQueue(2, tf.int32, shapes=())
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(7)]))
    take = q.dequeue()
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(session, coord=coord)
    assert len(threads) == 2, "one enqueue thread and one that cancels on stop"
    assert tf.train.start_queue_runners(session, coord=coord) == []
    assert session.run(take) == 7
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5)


def test_queue_runner_needs_enqueue_ops() -> None:
    with pytest.raises(ValueError, match="at least one enqueue op"):
        tf.train.QueueRunner(tf.FIFOQueue(1, tf.int32), [])


@pytest.mark.timeout(30)
def test_a_failed_step_does_not_swallow_a_later_element(session: tf.Session) -> None:
    q = tf.FIFOQueue(10, tf.int32, shapes=())
    dequeue = q.dequeue()
    broken = tf.reshape(tf.placeholder_with_default(tf.constant([1, 2]), [None]), [])
    with pytest.raises(tf.errors.InvalidArgumentError):
        session.run([dequeue, broken])  # the dequeue was waiting when the step failed
    session.run(q.enqueue(5))
    assert session.run(q.size()) == 1
    assert session.run(dequeue) == 5


@pytest.mark.timeout(30)
def test_a_failed_step_does_not_take_the_accumulated_gradients(session: tf.Session) -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[])
    take = acc.take_grad(1)
    broken = tf.reshape(tf.placeholder_with_default(tf.constant([1, 2]), [None]), [])
    with pytest.raises(tf.errors.InvalidArgumentError):
        session.run([take, broken])
    session.run(acc.apply_grad(4.0))
    assert session.run(acc.num_accumulated()) == 1
    assert session.run(take) == 4.0
