"""What keeps the operator's cost linear and its objects small at scale, without a cluster.

The cluster spec is computed once per job and pass (not once per pod), a job's replicas
are capped (by count, and by what one environment variable can hold), the record of
finished replicas stays compact, a finished job is not polled, and the event loop's lag
is measured. Speed itself is measured by bench/operator_scale.py, not here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import threading
import time
import tracemalloc
from typing import Any, Optional, cast

import pytest

from operator_sim import Sim, make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator import config
from tensorgrid_operator.controller import job_loop
from tensorgrid_operator.controller import looplag
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import finished_replicas
from tensorgrid_operator.resources import manifests


# --- the cluster spec, once per pass ---------------------------------------------------------


def test_tf_config_has_the_bytes_json_dumps_would_write() -> None:
    job_spec = spec_lib.parse_spec(make_job(ps=2, workers=3, chief=1, evaluators=1)["spec"])
    cluster = manifests.cluster_json("mnist", "team", job_spec)
    for key in spec_lib.all_replicas(job_spec):
        expected = json.dumps({"cluster": manifests.cluster_spec("mnist", "team", job_spec),
                               "task": {"type": key.rtype.task_type, "index": key.index},
                               "environment": "cloud"}, sort_keys=True)
        assert manifests.tf_config(cluster, key) == expected


def test_a_pass_computes_the_cluster_once_whatever_the_number_of_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = manifests.cluster_spec
    this_thread = threading.get_ident()

    def counted(*args: Any) -> dict[str, list[str]]:
        # Only this test's pass: in `make test` an operator the control-plane tests started may
        # still be reconciling its jobs on its own threads, through the same function.
        if threading.get_ident() == this_thread:
            calls.append(args)
        return original(*args)

    monkeypatch.setattr(manifests, "cluster_spec", counted)
    sim = Sim(make_job(ps=2, workers=200))
    plan = sim.step()
    assert len(plan.create_pods) == 202
    assert len(calls) == 1
    configs = {json.loads(e["value"])["task"]["index"] for p in plan.create_pods if "worker" in p.name
               for e in p.manifest()["spec"]["containers"][0]["env"] if e["name"] == "TF_CONFIG"}
    assert configs == set(range(200))


def test_a_plan_holds_no_manifests_until_they_are_sent() -> None:
    """Each manifest of a 2,000-replica job carries 80 KB of TF_CONFIG: the plan that held them all
    took 144 MB; it names the pods, and each manifest is built as its creation goes out."""
    sim = Sim(make_job(ps=1, workers=1999))
    tracemalloc.start()
    try:
        plan = sim.plan()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(plan.create_pods) == 2000
    assert held < 20 << 20, f"a plan of 2,000 pods holds {held >> 20} MiB"
    built = plan.create_pods[5].manifest()
    assert built["metadata"]["name"] == plan.create_pods[5].name
    assert built is not plan.create_pods[5].manifest(), "each caller gets its own to change"


def test_a_pod_built_alone_equals_one_built_with_the_passs_cluster() -> None:
    job = make_job(ps=1, workers=3)
    job_spec = spec_lib.parse_spec(job["spec"])
    key = spec_lib.ReplicaKey(spec_lib.ReplicaType.WORKER, 2)
    shared = manifests.cluster_json("mnist", "team", job_spec)
    assert manifests.build_pod(job, job_spec, key, 1) == manifests.build_pod(job, job_spec, key, 1, shared)


# --- the replica cap -----------------------------------------------------------------------


@pytest.mark.parametrize("ps, workers, evaluators, ok", [
    (1, spec_lib.MAX_REPLICAS - 1, 0, True),
    (1, spec_lib.MAX_REPLICAS, 0, False),
    (0, 1, spec_lib.MAX_REPLICAS, False),
    (0, 5000, 0, False),
])
def test_a_job_has_at_most_max_replicas(ps: int, workers: int, evaluators: int, ok: bool) -> None:
    raw = make_job(ps=ps, workers=workers, evaluators=evaluators)["spec"]
    if ok:
        spec_lib.parse_spec(raw)
        return
    with pytest.raises(ValueError) as error:
        spec_lib.parse_spec(raw)
    total = ps + workers + evaluators
    assert f"{total} replicas in all" in str(error.value)
    assert f"at most {spec_lib.MAX_REPLICAS}" in str(error.value)


def test_a_job_over_the_cap_fails_with_the_count_and_the_limit() -> None:
    sim = Sim(make_job(ps=1, workers=5000))
    plan = sim.step()
    assert plan.create_pods == [] and sim.status["state"] == "Failed"
    failed = sim.condition("Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "5001 replicas in all (PS 1 + Worker 5000)" in failed["message"]
    assert str(spec_lib.MAX_REPLICAS) in failed["message"]


def test_a_tf_config_too_large_for_an_environment_variable_fails_the_job() -> None:
    # Under the count cap, but long names make every address about 130 bytes.
    namespace = "n" * 63
    sim = Sim(make_job(name="j" * 40, namespace=namespace, ps=1, workers=spec_lib.MAX_REPLICAS - 1))
    plan = sim.step()
    assert plan.create_pods == [] and sim.status["state"] == "Failed"
    message = sim.condition("Failed")["message"]
    assert f"TF_CONFIG for {spec_lib.MAX_REPLICAS} replicas" in message
    assert f"over the {manifests.MAX_TF_CONFIG_BYTES} bytes" in message


def test_the_largest_job_fits_with_ordinary_names() -> None:
    job_spec = spec_lib.parse_spec(make_job(ps=1, workers=spec_lib.MAX_REPLICAS - 1)["spec"])
    cluster = manifests.cluster_json("resnet-large", "ml-team", job_spec)
    largest = spec_lib.ReplicaKey(spec_lib.ReplicaType.WORKER, spec_lib.MAX_REPLICAS - 2)
    assert len(manifests.tf_config(cluster, largest).encode()) < manifests.MAX_TF_CONFIG_BYTES


# --- finishedReplicas stays compact ------------------------------------------------------------


@pytest.mark.parametrize("indexes, text", [
    ([], ""), ([0], "0"), ([0, 1, 2], "0-2"), ([5, 0, 1, 2, 7, 8], "0-2,5,7-8"), ([3, 3, 4], "3-4"),
])
def test_index_ranges(indexes: list[int], text: str) -> None:
    assert finished_replicas.format_ranges(indexes) == text
    if text:
        assert finished_replicas.parse_ranges(text) == sorted(set(indexes))


@pytest.mark.parametrize("text", ["a", "3-1", "-1", "1-", "1,,2"])
def test_malformed_index_ranges_are_named(text: str) -> None:
    with pytest.raises(ValueError, match="finishedReplicas indexes"):
        finished_replicas.parse_ranges(text)


def _record(index: int, outcome: str = "Succeeded", message: str = "exited 0", code: Optional[int] = 0,
            time: str = "2030-01-01T00:00:00Z") -> dict[str, Any]:
    record: dict[str, Any] = {"replica": f"worker-{index}", "type": "Worker", "index": index, "outcome": outcome,
                              "reason": "Completed" if outcome == "Succeeded" else "Error", "message": message,
                              "finishedTime": time}
    if code is not None:
        record["exitCode"] = code
    return record


def test_replicas_that_ended_alike_share_one_entry_and_expand_back() -> None:
    records = [_record(i, time=f"2030-01-01T00:00:{i % 60:02d}Z") for i in range(3000)]
    records += [_record(3000, "Failed", "exit code 1 is permanent under restartPolicy ExitCode", 1)]
    entries = finished_replicas.compact(records)
    assert [(e["indexes"], e["outcome"]) for e in entries] == [("0-2999", "Succeeded"), ("3000", "Failed")]
    assert entries[0]["finishedTime"] == "2030-01-01T00:00:59Z"
    assert len(json.dumps(entries)) < 500  # one record per replica made this 630 KB
    expanded = finished_replicas.expand(entries)
    assert len(expanded) == 3001
    assert expanded["worker-3000"]["exitCode"] == 1 and expanded["worker-17"]["outcome"] == "Succeeded"
    assert finished_replicas.compact(expanded.values()) == entries


def test_entries_of_one_replica_each_as_older_operators_wrote_are_read() -> None:
    old = [{**_record(2), "podUID": "u-2"}, {**_record(0), "podUID": "u-0"}]
    expanded = finished_replicas.expand(old)
    assert sorted(expanded) == ["worker-0", "worker-2"]
    assert finished_replicas.compact(expanded.values())[0]["indexes"] == "0,2"


def test_a_job_whose_workers_all_succeed_keeps_one_entry() -> None:
    sim = Sim(make_job(ps=1, workers=50, success_policy="AllWorkers"))
    sim.step()
    sim.run_all()
    sim.step()
    for i in range(50):
        sim.set_phase(f"mnist-worker-{i}", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Succeeded"
    assert [(e["type"], e["indexes"], e["outcome"]) for e in sim.status["finishedReplicas"]] == [
        ("Worker", "0-49", "Succeeded")]
    assert sim.status["replicaStatuses"]["Worker"]["succeeded"] == 50
    assert sim.step().status is None  # the compact form reads back to the same status


# --- finished jobs are not polled -------------------------------------------------------------


@pytest.mark.parametrize("finished, requeue_after, progress_after, expected", [
    (False, None, None, 60.0),        # resync
    (False, 5.0, None, 5.0),          # a deadline or a retry
    (False, None, 30.0, 30.0),        # the next progress reading
    (False, 500.0, None, 60.0),       # never later than the resync
    (False, -1.0, None, 0.0),         # overdue
    (True, None, None, math.inf),     # finished, no TTL: only events wake it
    (True, 3600.0, None, 3600.0),     # finished: its TTL, even past the resync
])
def test_when_a_job_is_reconciled_again(finished: bool, requeue_after: Optional[float],
                                        progress_after: Optional[float], expected: float) -> None:
    assert job_loop.next_reconcile_in(finished, requeue_after, progress_after, 60.0) == expected


# --- the event loop's lag -------------------------------------------------------------------------


def test_the_lag_of_a_blocked_event_loop_is_recorded() -> None:
    def max_lag() -> float:
        return float(metrics.REGISTRY.get_sample_value("tensorgrid_operator_event_loop_lag_max_seconds") or 0.0)

    async def block_the_loop() -> None:
        watcher = asyncio.create_task(looplag.watch_lag(interval=0.01))
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # code that runs on the loop without yielding, as a reconcile on the loop did
        await asyncio.sleep(0.05)
        watcher.cancel()

    before = metrics.REGISTRY.get_sample_value("tensorgrid_operator_event_loop_lag_seconds_count") or 0.0
    asyncio.run(block_the_loop())
    assert max_lag() >= 0.25
    assert (metrics.REGISTRY.get_sample_value("tensorgrid_operator_event_loop_lag_seconds_count") or 0.0) > before


def test_a_job_whose_loop_ended_leaves_nothing_behind() -> None:
    """Every per-job table of the running operator (a dict keyed by job) is dropped by
    ``forget_job``: thousands of jobs made and deleted must not leave an entry each. A table
    added later without a line in ``forget_job`` fails here. ``wakers`` is the job loop's own, ``tfjob_wakers``
    the TFJob loop's (controller/tfjob_loop.py drops its entry when it ends)."""
    operator = running_operator.RunningOperator(settings=config.Settings(), kube=cast(Any, None),
                                                executor=cast(Any, None), deciders=cast(Any, None))
    key = ("team", "mnist")
    tables = [f.name for f in dataclasses.fields(operator)
              if isinstance(getattr(operator, f.name), dict) and f.name not in ("wakers", "tfjob_wakers")]
    assert {"progress_due", "job_objects", "expectations", "status_written_at"} <= set(tables)
    for table in tables:
        getattr(operator, table)[key] = cast(Any, object())
    operator.known_jobs.remember(key, {"metadata": {"name": "mnist"}}, operator.known_jobs.changes(key))
    operator.forget_job(key)
    assert [table for table in tables if key in getattr(operator, table)] == []
    assert operator.known_jobs.get(key) is None
