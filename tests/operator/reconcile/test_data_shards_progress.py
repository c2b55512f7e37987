"""status.progress.dataShards: the epoch, the fraction of shards done and the shards per epoch of each
``dynamic_shards`` data set,
read from the chief's metrics page as the runtime writes it, kept while no page gives them, and kept in
the chief's final figures (no cluster)."""

from __future__ import annotations

import datetime
import json

import prometheus_client

from operator_sim import T0, Sim, make_job
from tensorgrid import monitoring
from tensorgrid_operator.reconcile import progress

STEP_PAGE = "# TYPE tensorgrid_global_step gauge\ntensorgrid_global_step{task=\"/job:ps/replica:0/task:0\"} 300.0\n"


def _at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def test_the_runtimes_shard_gauges_are_read() -> None:
    # The page the chief's task serves (tensorgrid.monitoring's registry, as the shard service sets it).
    monitoring.DATA_SHARDS_EPOCH.labels("clicks-progress-test").set(2)
    monitoring.DATA_SHARDS_DONE_FRACTION.labels("clicks-progress-test").set(0.375)
    monitoring.DATA_SHARDS_PER_EPOCH.labels("clicks-progress-test").set(16)
    page = prometheus_client.generate_latest(monitoring.REGISTRY).decode()
    reading = progress.read_page("mnist-worker-0", page)
    assert ("clicks-progress-test", 2, 0.375, 16) in reading.data_shards


def test_the_progress_shows_each_data_set() -> None:
    page = STEP_PAGE + (
        "# TYPE tensorgrid_data_shards_epoch gauge\n"
        "tensorgrid_data_shards_epoch{dataset=\"train\"} 1.0\n"
        "tensorgrid_data_shards_epoch{dataset=\"eval\"} 0.0\n"
        "# TYPE tensorgrid_data_shards_done_fraction gauge\n"
        "tensorgrid_data_shards_done_fraction{dataset=\"train\"} 0.123456\n"
        "tensorgrid_data_shards_done_fraction{dataset=\"eval\"} 1.0\n"
        "# TYPE tensorgrid_data_shards_per_epoch gauge\n"
        "tensorgrid_data_shards_per_epoch{dataset=\"train\"} 30.0\n")
    found = progress.next_progress(None, [progress.read_page("mnist-worker-0", page)], _at(0))
    # A page without the shards per epoch (a runtime that does not export them) leaves them out.
    assert found is not None and found["dataShards"] == [
        {"dataset": "eval", "epoch": 0, "fractionDone": 1.0},
        {"dataset": "train", "epoch": 1, "fractionDone": 0.1235, "shardsPerEpoch": 30}]


def test_a_data_set_with_half_its_figures_or_bad_ones_is_not_shown() -> None:
    page = STEP_PAGE + (
        "tensorgrid_data_shards_epoch{dataset=\"train\"} 1.0\n"
        "tensorgrid_data_shards_epoch{dataset=\"eval\"} NaN\n"
        "tensorgrid_data_shards_done_fraction{dataset=\"eval\"} 0.5\n")
    reading = progress.read_page("mnist-worker-0", page)
    assert reading.data_shards == () and reading.global_step == 300
    found = progress.next_progress(None, [reading], _at(0))
    assert found is not None and "dataShards" not in found


def test_the_last_known_shards_stay_while_no_page_gives_them() -> None:
    old = {"globalStep": 100, "lastUpdateTime": "2026-01-01T00:00:00Z",
           "dataShards": [{"dataset": "train", "epoch": 0, "fractionDone": 0.5}]}
    found = progress.next_progress(old, [progress.read_page("mnist-ps-0", STEP_PAGE)], _at(30))
    assert found is not None and found["dataShards"] == old["dataShards"] and found["globalStep"] == 300


def test_the_final_figures_keep_the_last_reading_of_the_shards() -> None:
    sim = Sim(make_job(ps=1, workers=1, chief=1))
    sim.step()
    sim.run_all()
    sim.step()
    shards = [{"dataset": "train", "epoch": 3, "fractionDone": 1.0}]
    sim.job["status"]["progress"] = {"globalStep": 900, "lastUpdateTime": "2030-01-01T00:00:10Z",
                                     "dataShards": shards}
    sim.set_phase("mnist-chief-0", "Succeeded", 0)
    terminated = sim.pods["mnist-chief-0"]["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated["message"] = json.dumps({progress.FINAL_FIGURES_KEY: {"globalStep": 1000}})
    sim.step()
    assert sim.status["progress"]["final"] and sim.status["progress"]["globalStep"] == 1000
    assert sim.status["progress"]["dataShards"] == shards
