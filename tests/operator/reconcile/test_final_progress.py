"""A finished job keeps its final figures: the chief's runtime leaves its last global step, rate,
target and losses in its termination message, and the pass that sees the chief ended makes them
``status.progress`` (``final``), whatever the readings of the metrics endpoints said before (or
never said, for a job shorter than the progress interval)."""

from __future__ import annotations

import json
from typing import Any, Optional

from operator_sim import Sim, make_job
from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.resources import manifests

FIGURES = {"globalStep": 1003, "stepsPerSecond": 66.87, "targetStep": 1000,
           "losses": {"loss": 0.1234567, "eval/total_loss": 0.5}}


def _end(sim: Sim, pod: str, exit_code: int, message: Optional[str], finished: str = "2030-01-01T00:00:15Z") -> None:
    sim.set_phase(pod, "Succeeded" if exit_code == 0 else "Failed", exit_code)
    terminated = sim.pods[pod]["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated["finishedAt"] = finished
    if message is not None:
        terminated["message"] = message


def _message(figures: dict[str, Any]) -> str:
    return json.dumps({progress.FINAL_FIGURES_KEY: figures})


def _chief_job() -> Sim:
    sim = Sim(make_job(ps=1, workers=1, chief=1))
    sim.step()
    sim.run_all()
    sim.step()
    return sim


def test_a_job_shorter_than_the_progress_interval_keeps_the_chiefs_figures() -> None:
    sim = _chief_job()
    assert "progress" not in sim.status  # never read: the job ends before the first reading
    _end(sim, "mnist-chief-0", 0, _message(FIGURES))
    sim.step()
    assert sim.status["state"] == "Succeeded"
    assert sim.status["progress"] == {"globalStep": 1003, "stepsPerSecond": 66.87, "targetStep": 1000,
                                      "loss": 0.123457, "lossTag": "loss", "final": True,
                                      "lastUpdateTime": "2030-01-01T00:00:15Z"}
    sim.step(60)  # later passes (cleanup, TTL) leave the figures as they are
    assert sim.status["progress"]["final"] and sim.status["progress"]["globalStep"] == 1003


def test_the_figures_replace_the_last_reading_and_keep_what_the_chief_left_out() -> None:
    sim = _chief_job()
    sim.job["status"]["progress"] = {"globalStep": 900, "stepsPerSecond": 60.0, "loss": 0.2, "lossTag": "loss",
                                     "lastUpdateTime": "2030-01-01T00:00:10Z",
                                     "estimatedCompletionTime": "2030-01-01T00:00:12Z"}
    _end(sim, "mnist-chief-0", 0, _message({"globalStep": 1000}))
    sim.step()
    assert sim.status["progress"] == {"globalStep": 1000, "stepsPerSecond": 60.0, "loss": 0.2, "lossTag": "loss",
                                      "final": True, "lastUpdateTime": "2030-01-01T00:00:15Z"}


def test_a_programs_own_termination_message_is_not_read_as_figures() -> None:
    sim = _chief_job()
    _end(sim, "mnist-chief-0", 0, "trained to 0.95 accuracy")
    sim.step()
    assert sim.status["state"] == "Succeeded" and "progress" not in sim.status
    assert progress.final_figures(json.dumps({progress.FINAL_FIGURES_KEY: {"globalStep": "12"}})) is None


def test_a_failed_chief_that_restarts_leaves_the_progress_to_the_readings() -> None:
    sim = Sim(make_job(ps=1, workers=1, chief=1, policy="OnFailure"))
    sim.step()
    sim.run_all()
    sim.step()
    _end(sim, "mnist-chief-0", 1, _message(FIGURES))
    sim.step()
    assert sim.status["state"] == "Restarting" and "progress" not in sim.status


def test_a_failed_job_keeps_the_figures_of_the_chief_that_failed_it() -> None:
    sim = _chief_job()
    _end(sim, "mnist-chief-0", 1, _message(FIGURES))
    sim.step()
    assert sim.status["state"] == "Failed" and sim.status["progress"]["globalStep"] == 1003


def test_only_the_chief_is_told_where_to_leave_its_figures() -> None:
    sim = _chief_job()
    env = {name: {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
           for name, pod in sim.pods.items()}
    assert env["mnist-chief-0"][manifests.FINAL_FIGURES_PATH_ENV] == manifests.TERMINATION_LOG
    assert manifests.FINAL_FIGURES_PATH_ENV not in env["mnist-worker-0"]
    assert manifests.FINAL_FIGURES_PATH_ENV not in env["mnist-ps-0"]
