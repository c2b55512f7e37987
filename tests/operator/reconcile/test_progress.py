"""status.progress: which endpoints are read, what a metrics page says, and the progress kept (no cluster)."""

from __future__ import annotations

import datetime

from operator_sim import T0, Sim, make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import progress

PAGE = """# HELP tensorgrid_global_step Value of the global_step variable on this task.
# TYPE tensorgrid_global_step gauge
tensorgrid_global_step{task="/job:ps/replica:0/task:0"} 1200.0
# HELP tensorgrid_target_step The global step at which this task's StopAtStepHook ends the training.
# TYPE tensorgrid_target_step gauge
tensorgrid_target_step 0.0
"""


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def running_pods(job: dict[str, object]) -> Sim:
    sim = Sim(job)  # type: ignore[arg-type]
    sim.step()
    sim.run_all()
    for i, pod in enumerate(sorted(sim.pods)):
        sim.pods[pod]["status"]["podIP"] = f"10.0.0.{i + 1}"
    return sim


def test_the_chief_and_the_parameter_servers_are_read() -> None:
    sim = running_pods(make_job(ps=2, workers=3, chief=1))
    sim.pods["mnist-ps-1"]["status"]["podIP"] = "fd00::7"
    sim.pods["mnist-worker-2"]["status"] = {"phase": "Pending"}
    job_spec = spec_lib.parse_spec(sim.job["spec"])
    targets = progress.scrape_targets(job_spec, list(sim.pods.values()))
    assert [t.pod for t in targets] == ["mnist-chief-0", "mnist-ps-0", "mnist-ps-1"]
    assert targets[2].url == "http://[fd00::7]:9090/metrics"


def test_without_a_chief_worker_0_is_read_and_a_declared_metrics_port_is_used() -> None:
    job = make_job(ps=1, workers=2)
    for replica in job["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["ports"] = [{"name": "metrics", "containerPort": 9464}]
    sim = running_pods(job)
    sim.pods["mnist-ps-0"]["status"].pop("podIP")  # not yet known: skipped
    targets = progress.scrape_targets(spec_lib.parse_spec(job["spec"]), list(sim.pods.values()))
    assert [(t.pod, t.url) for t in targets] == [("mnist-worker-0", "http://10.0.0.2:9464/metrics")]
    env = {e["name"]: e["value"] for e in sim.pods["mnist-worker-0"]["spec"]["containers"][0]["env"]}
    assert env["TENSORGRID_METRICS_PORT"] == "9464"
    ports = {p["name"]: p["port"] for p in sim.services["mnist-worker-0"]["spec"]["ports"]}
    assert ports["metrics"] == 9464


def test_a_page_gives_the_largest_step_and_a_target_of_zero_is_none() -> None:
    reading = progress.read_page("mnist-ps-0", PAGE + 'tensorgrid_global_step{task="/job:ps/replica:0/task:1"} 7\n')
    assert (reading.global_step, reading.target_step, reading.error) == (1200, None, "")
    chief = progress.read_page("mnist-chief-0", "tensorgrid_target_step 5000.0\n")
    assert (chief.global_step, chief.target_step) == (None, 5000)


def test_a_page_that_is_not_prometheus_text_is_an_error_naming_the_pod() -> None:
    reading = progress.read_page("mnist-ps-0", "tensorgrid_global_step{oops 12\n")
    assert reading.global_step is None and reading.error.startswith("mnist-ps-0: the metrics page is not")


def test_rate_and_estimated_completion() -> None:
    first = progress.next_progress(None, [progress.Reading("ps-0", 1000), progress.Reading("chief-0", None, 5000)],
                                   at(0))
    assert first == {"globalStep": 1000, "targetStep": 5000, "lastUpdateTime": "2030-01-01T00:00:00Z"}
    second = progress.next_progress(first, [progress.Reading("ps-0", 1600), progress.Reading("chief-0")], at(30))
    assert second == {"globalStep": 1600, "targetStep": 5000, "stepsPerSecond": 20.0,
                      "lastUpdateTime": "2030-01-01T00:00:30Z", "estimatedCompletionTime": "2030-01-01T00:03:20Z"}


def test_a_step_going_back_restarts_the_rate() -> None:
    old = {"globalStep": 1600, "lastUpdateTime": "2030-01-01T00:00:30Z", "stepsPerSecond": 20.0}
    new = progress.next_progress(old, [progress.Reading("ps-0", 1500)], at(60))
    assert new == {"globalStep": 1500, "lastUpdateTime": "2030-01-01T00:01:00Z"}


def test_unreachable_endpoints_keep_the_last_progress_and_say_why() -> None:
    old = {"globalStep": 1600, "lastUpdateTime": "2030-01-01T00:00:30Z", "stepsPerSecond": 20.0}
    error = "mnist-ps-0: could not read http://10.0.0.1:9090/metrics: [Errno 111] Connection refused"
    new = progress.next_progress(old, [progress.Reading("mnist-ps-0", error=error)], at(60))
    assert new == dict(old, message=error)
    assert progress.next_progress(None, [], at(0)) is None
    assert progress.next_progress(None, [progress.Reading("ps-0")], at(0)) == {
        "message": "no task of the job exports tensorgrid_global_step yet"}


LOSS_PAGE = """# TYPE tensorgrid_summary_scalar gauge
tensorgrid_summary_scalar{tag="accuracy"} 0.91
tensorgrid_summary_scalar{tag="train/total_loss"} 0.52
tensorgrid_summary_scalar{tag="train/loss"} 0.48
"""


def test_the_loss_is_the_summary_whose_tag_names_it_most_surely() -> None:
    reading = progress.read_page("mnist-chief-0", LOSS_PAGE)
    assert (reading.loss, reading.loss_tag) == (0.48, "train/loss")
    exact = progress.read_page("mnist-chief-0", LOSS_PAGE + 'tensorgrid_summary_scalar{tag="loss"} 0.4\n')
    assert (exact.loss, exact.loss_tag) == (0.4, "loss")
    only_accuracy = progress.read_page("mnist-chief-0", 'tensorgrid_summary_scalar{tag="accuracy"} 0.9\n')
    assert only_accuracy.loss is None and only_accuracy.loss_tag == ""


def test_the_loss_goes_into_the_progress_and_stays_until_a_new_one() -> None:
    first = progress.next_progress(None, [progress.Reading("chief-0", None, loss=0.123456789, loss_tag="loss"),
                                          progress.Reading("ps-0", 100)], at(0))
    assert (first["loss"], first["lossTag"]) == (0.123457, "loss")
    second = progress.next_progress(first, [progress.Reading("chief-0"), progress.Reading("ps-0", 200)], at(30))
    assert (second["loss"], second["lossTag"], second["globalStep"]) == (0.123457, "loss", 200)


def test_a_non_finite_loss_is_said_in_the_message() -> None:
    old = {"globalStep": 100, "lastUpdateTime": "2030-01-01T00:00:00Z", "loss": 0.5, "lossTag": "loss"}
    new = progress.next_progress(old, [progress.Reading("chief-0", None, loss=float("nan"), loss_tag="loss"),
                                       progress.Reading("ps-0", 160)], at(30))
    assert "loss" not in new and new["message"] == "chief-0 reports a non-finite loss (loss = nan)"
