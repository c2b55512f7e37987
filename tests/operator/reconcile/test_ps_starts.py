"""status.parameterServerStarts and PSStateRecovered: which recovery a PS's new pod made (no cluster)."""

from __future__ import annotations

import datetime

from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.reconcile import ps_starts

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
PS0 = '/job:ps/replica:0/task:0'


def start(uid: str, from_replica: bool, replica: str = "ps-0") -> ps_starts.PSStart:
    return ps_starts.PSStart(replica, f"mnist-{replica}", uid, from_replica)


def after(readings: list[list[ps_starts.PSStart]]) -> tuple[dict[str, object], list[tuple[str, str, str]]]:
    """The status after each reading in turn, and every event said."""
    status: dict[str, object] = {}
    events: list[tuple[str, str, str]] = []
    for i, seen in enumerate(readings):
        report = ps_starts.report(status, seen, T0 + datetime.timedelta(seconds=i))
        status = {**status, **report.patch(status)}
        events += report.events
    return status, events


def sources(status: dict[str, object]) -> list[tuple[str, str, str]]:
    return [(s["replica"], s["podUID"], s["source"]) for s in status[ps_starts.FIELD]]  # type: ignore[attr-defined]


def condition(status: dict[str, object]) -> tuple[str, str]:
    found = [c for c in status.get("conditions") or [] if c["type"] == ps_starts.CONDITION]  # type: ignore[attr-defined]
    return (found[0]["status"], found[0]["reason"]) if found else ("", "")


def test_a_first_pod_that_started_empty_is_recorded_and_says_nothing() -> None:
    status, events = after([[start("a", False)], [start("a", False)]])
    assert sources(status) == [("ps-0", "a", "Initial")]
    assert condition(status) == ("", "") and events == []
    assert ps_starts.report(status, [start("a", False)], T0).patch(status) == {}  # the same pod: nothing to write


def test_a_new_pod_that_loaded_the_live_replica() -> None:
    status, events = after([[start("a", False)], [start("b", True)]])
    assert sources(status) == [("ps-0", "b", "LiveReplica")]
    assert condition(status) == ("True", "LoadedLiveReplica")
    assert [(kind, reason) for kind, reason, _ in events] == [("Normal", "LoadedLiveReplica")]
    assert "mnist-ps-0 loaded its predecessor's state from the live replica" in events[0][2]


def test_a_zero_after_an_earlier_pod_is_the_checkpoint_fallback() -> None:
    status, events = after([[start("a", False)], [start("b", True)], [start("c", False)]])
    assert sources(status) == [("ps-0", "c", "Checkpoint")]
    assert condition(status) == ("False", "RestoredCheckpoint")
    assert [(kind, reason) for kind, reason, _ in events] == [("Normal", "LoadedLiveReplica"),
                                                              ("Warning", "RestoredCheckpoint")]
    assert "the chief restores the last checkpoint" in events[1][2]


def test_a_first_pod_that_loaded_a_replica_still_says_so() -> None:
    # Its predecessor was never recorded (the job ran before the operator read it): the load is news all the same.
    status, events = after([[start("b", True)]])
    assert sources(status) == [("ps-0", "b", "LiveReplica")] and condition(status) == ("True", "LoadedLiveReplica")


def test_two_ps_at_once_the_fallback_wins_the_condition_and_both_are_named() -> None:
    status, events = after([[start("a", False), start("x", False, "ps-1")],
                            [start("b", True), start("y", False, "ps-1")]])
    assert sources(status) == [("ps-0", "b", "LiveReplica"), ("ps-1", "y", "Checkpoint")]
    assert condition(status) == ("False", "RestoredCheckpoint")
    message = [c for c in status["conditions"] if c["type"] == ps_starts.CONDITION][0]["message"]  # type: ignore[attr-defined]
    assert "mnist-ps-1 started empty" in message and "mnist-ps-0 loaded" in message
    assert len(events) == 2


def test_other_conditions_are_kept() -> None:
    running = {"type": "Running", "status": "True", "reason": "AllPodsRunning", "message": "m",
               "lastTransitionTime": "2030-01-01T00:00:00Z"}
    status = {"conditions": [running], ps_starts.FIELD: [
        {"replica": "ps-0", "pod": "mnist-ps-0", "podUID": "a", "source": "Initial", "time": "2030-01-01T00:00:00Z"}]}
    report = ps_starts.report(status, [start("b", True)], T0)
    assert [c["type"] for c in report.conditions] == ["Running", ps_starts.CONDITION]


def test_a_metrics_page_says_whether_the_ps_started_from_its_replica() -> None:
    page = f'tensorgrid_global_step{{task="{PS0}"}} 12.0\ntensorgrid_ps_started_from_replica{{task="{PS0}"}} 1.0\n'
    assert progress.read_page("mnist-ps-0", page).started_from_replica is True
    assert progress.read_page("mnist-ps-0", page.replace("} 1.0", "} 0.0")).started_from_replica is False
    assert progress.read_page("mnist-ps-0", "tensorgrid_global_step 3\n").started_from_replica is None  # still loading
    assert progress.read_page("mnist-ps-0", page.replace("} 1.0", "} 7.0")).started_from_replica is None
