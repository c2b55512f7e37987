"""The shard queue of dynamic_shards without a cluster: leases, losses, retries, epochs, its saved state."""

from __future__ import annotations

import pytest

from tensorgrid.distributed import shard_queue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_queue(state: object = None, **spec: object) -> tuple[shard_queue.ShardQueue, Clock]:
    clock = Clock()
    defaults: dict[str, object] = {"num_records": 10, "shard_size": 3, "lease_seconds": 5.0}
    return shard_queue.ShardQueue("q", shard_queue.ShardsSpec(**{**defaults, **spec}), state, clock), clock  # type: ignore[arg-type]


def drain(queue: shard_queue.ShardQueue, task: str = "w0", client: str = "c0") -> list[tuple[int, int]]:
    """Takes every shard as one worker, reporting each done in the next request; (epoch, index) in order."""
    taken, finished = [], 0
    while True:
        answer = queue.next_shard(task, client, finished)
        if answer.outcome != "shard":
            assert answer.outcome == "end", answer
            return taken
        taken.append((answer.epoch, answer.index))
        finished = answer.lease


def test_each_shard_once_per_epoch_and_the_last_one_is_shorter() -> None:
    queue, _ = make_queue(num_epochs=2)
    assert queue.spec.num_shards == 4 and queue.spec.shard(3) == ("", 9, 10)
    assert drain(queue) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]


def test_shuffled_epochs_differ_and_cover_every_shard() -> None:
    queue, _ = make_queue(num_records=40, shard_size=2, num_epochs=2, shuffle=True, seed=7)
    taken = drain(queue)
    first, second = [i for e, i in taken if e == 0], [i for e, i in taken if e == 1]
    assert sorted(first) == sorted(second) == list(range(20)) and first != second


def test_a_lease_that_runs_out_goes_back_to_the_front_and_its_late_report_is_ignored() -> None:
    queue, clock = make_queue()
    lost = queue.next_shard("w0", "c0")
    clock.now = 6.0
    again = queue.next_shard("w1", "c1")
    assert (again.index, again.outcome) == (lost.index, "shard")
    queue.next_shard("w0", "c0", lost.lease)  # the dead worker's report is not taken
    assert queue.state()[3 + lost.index] == 1  # lost once, still to do (leased to w1)


def test_renewing_keeps_a_lease_and_names_the_leases_not_held() -> None:
    queue, clock = make_queue()
    held = queue.next_shard("w0", "c0")
    for now in (4.0, 8.0, 12.0):
        clock.now = now
        assert queue.renew("c0", [held.lease, 12345]) == [12345]
    assert queue.next_shard("w1", "c1").index != held.index


def test_a_task_back_as_another_process_loses_its_old_leases_at_once() -> None:
    queue, _ = make_queue()
    old = queue.next_shard("w0", "first-process")
    assert queue.next_shard("w0", "second-process").index == old.index


def test_a_shard_lost_max_attempts_times_fails_and_the_epoch_still_ends() -> None:
    queue, clock = make_queue(num_records=2, shard_size=1, max_attempts=2)
    for attempt in range(2):
        assert queue.next_shard("w0", f"c{attempt}").index == 0
        clock.now += 10
    finished = queue.next_shard("w1", "c9")
    assert finished.index == 1 and queue.failed_shards == [0]
    assert queue.next_shard("w1", "c9", finished.lease).outcome == "end"


def test_waits_while_the_last_shards_are_in_flight() -> None:
    queue, _ = make_queue(num_records=2, shard_size=1)
    queue.next_shard("w0", "c0")
    queue.next_shard("w1", "c1")
    answer = queue.next_shard("w2", "c2")
    assert answer.outcome == "wait" and "in flight" in answer.reason and queue.waiting_clients() == 3


def test_the_state_restores_done_shards_and_hands_in_flight_ones_out_again() -> None:
    queue, _ = make_queue(num_epochs=2)
    done = queue.next_shard("w0", "c0")
    queue.next_shard("w0", "c0", done.lease)  # done; the second is in flight
    restored, _ = make_queue(queue.state(), num_epochs=2)
    assert restored.epoch == 0 and restored.fraction_done == 0.25
    assert [i for _, i in drain(restored)] == [1, 2, 3, 0, 1, 2, 3]


def test_a_state_of_another_data_set_is_refused_by_name() -> None:
    queue, _ = make_queue()
    with pytest.raises(ValueError, match="does not fit this data set: version 1 with 2 shards"):
        make_queue(queue.state(), num_records=4, shard_size=2)


@pytest.mark.parametrize("spec, message", [
    ({"num_records": 0, "files": ()}, "either files or num_records"),
    ({"shard_size": 0}, "shard_size must be a positive"),
    ({"num_records": 0, "files": ("a",), "shard_size": 2}, "each file is one shard"),
    ({"max_attempts": 0}, "max_attempts must be at least 1"),
    ({"lease_seconds": 0.0}, "lease_seconds must be positive"),
])
def test_bad_definitions_are_refused_naming_the_value(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_queue(**spec)


def test_the_service_waits_for_the_chief_and_refuses_another_definition() -> None:
    service = shard_queue.ShardService()
    spec = shard_queue.ShardsSpec(num_records=4, shard_size=2)
    assert "not opened" in service.next_shard("d", spec, "w0", "c0", 0).reason
    service.open("d", spec, None)
    assert service.next_shard("d", spec, "w0", "c0", 0).outcome == "shard"
    with pytest.raises(ValueError, match=r"shard_size=1 \(the chief opened it with 2\)"):
        service.next_shard("d", shard_queue.ShardsSpec(num_records=4, shard_size=1), "w1", "c1", 0)


def test_a_worker_leaving_gives_its_shard_back_at_once_without_counting_a_loss() -> None:
    service = shard_queue.ShardService()
    spec = shard_queue.ShardsSpec(num_records=4, shard_size=2)
    service.open("d", spec, None)
    held = service.next_shard("d", spec, "w0", "c0", 0)
    assert service.renew("d", "c1", [held.lease], release=True) == []  # not c1's to give back
    assert service.renew("d", "c0", [held.lease], release=True) == []
    assert service.next_shard("d", spec, "w1", "c1", 0).index == held.index
    assert service.queue("d").state()[3 + held.index] == 0
