"""A PS whose container restarts in the same pod (the PS a standby became, whose pod restarts its
container) is a new start of that PS: status.parameterServerStarts records which recovery it made
(no cluster)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.reconcile import ps_starts

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


def start(uid: str, from_replica: bool, restarts: int) -> ps_starts.PSStart:
    return ps_starts.PSStart("ps-0", "click-ps-0-standby-x2", uid, from_replica, restarts)


FIRST_POD = {ps_starts.FIELD: [{"replica": "ps-0", "pod": "click-ps-0", "podUID": "old", "source": "Initial",
                                 "time": "2030-01-01T00:00:00Z"}]}


@pytest.mark.parametrize("before, readings, source, events", [
    # The standby took over (a new pod of ps-0), then its container restarted and loaded the replica.
    (FIRST_POD, [start("s", True, 0), start("s", True, 1)], ("s", "LiveReplica", 1),
     ["LoadedLiveReplica", "LoadedLiveReplica"]),
    # ... or started empty (the next standby held nothing): the checkpoint fallback, said.
    (FIRST_POD, [start("s", True, 0), start("s", False, 1)], ("s", "Checkpoint", 1),
     ["LoadedLiveReplica", "RestoredCheckpoint"]),
    # The same process read again: nothing new.
    (FIRST_POD, [start("s", True, 2), start("s", True, 2)], ("s", "LiveReplica", 2), ["LoadedLiveReplica"]),
    # A first pod with no restart: recorded as before (no containerRestarts field).
    ({}, [start("a", False, 0), start("a", False, 0)], ("a", "Initial", None), []),
])
def test_a_restart_in_the_same_pod_is_a_new_start(before: dict[str, Any], readings: list[ps_starts.PSStart],
                                                  source: tuple[str, str, Any], events: list[str]) -> None:
    status = dict(before)
    said: list[str] = []
    for i, seen in enumerate(readings):
        report = ps_starts.report(status, [seen], T0 + datetime.timedelta(seconds=i))
        status = {**status, **report.patch(status)}
        said += [reason for _, reason, _ in report.events]
    record = status[ps_starts.FIELD][0]
    assert (record["podUID"], record["source"], record.get("containerRestarts")) == source
    assert said == events


def test_the_targets_count_the_restarts_of_the_main_container_only() -> None:
    job = make_job("click", ps=1, workers=1)
    job_spec = spec_lib.parse_spec(job["spec"])
    pod = {"metadata": {"name": "click-ps-0-standby-x2", "uid": "s",
                        "labels": {spec_lib.LABEL_JOB_NAME: "click", spec_lib.LABEL_REPLICA_TYPE: "ps",
                                   spec_lib.LABEL_REPLICA_INDEX: "0"}},
           "spec": {"containers": [{"name": "ps-standby"}, {"name": "log-shipper"}]},
           "status": {"phase": "Running", "podIP": "10.0.0.7",
                      "containerStatuses": [{"name": "ps-standby", "restartCount": 2},
                                            {"name": "log-shipper", "restartCount": 5}]}}
    [target] = progress.scrape_targets(job_spec, [pod])
    assert (target.ps_replica, target.uid, target.container_restarts) == ("ps-0", "s", 2)
