"""The sparse models PS users train, as TrainingJobs (issues 25 and 29: "run as a TrainingJob"):
`kubectl apply -f examples/trainingjob-estimator.yaml` (a TF1 wide-and-deep Estimator with feature
columns, partitioned over 2 PS tasks, with an Evaluator replica evaluating each checkpoint) and
`examples/trainingjob-embedding.yaml` (a click model on raw 64-bit ids in embedding variables over
2 PS tasks, admitted and evicted as it trains). Each trains to success."""

from __future__ import annotations

import re

from cluster_support import Namespace, example, wait_for

JOB_TIMEOUT = 600
# The evaluator's line per checkpoint, as TensorFlow's Estimator logs it.
EVALUATED = r"Saving dict for global step (\d+): .*\bauc = ([0-9.]+)"


def test_estimator_with_an_evaluator_trains_and_is_evaluated(ns: Namespace) -> None:
    ns.apply(example("estimator"))
    evaluator = "wide-deep-estimator-evaluator-0"
    evaluations: dict[int, float] = {}

    def evaluated_or_ended() -> bool:
        # The evaluator's log is read while it runs: once the Chief succeeds, it is stopped and deleted.
        evaluations.update({int(step): float(auc) for step, auc in re.findall(EVALUATED, ns.logs(evaluator))})
        return ns.state("wide-deep-estimator") in ("Succeeded", "Failed")

    wait_for("the estimator job to end", evaluated_or_ended, JOB_TIMEOUT, interval=3.0)
    job = ns.job("wide-deep-estimator")
    assert job["status"]["state"] == "Succeeded", job["status"]
    # The evaluator evaluated a checkpoint of the trained model (AUC 0.5-0.6 at step 0, 0.77-0.78 from
    # step 150 on when run by `tensorgrid local`; the hidden model's is 0.82).
    assert any(step > 0 and auc > 0.7 for step, auc in evaluations.items()), evaluations
    chief = ns.logs("wide-deep-estimator-chief-0")
    saved = [int(step) for step in re.findall(r"Saved checkpoint for step (\d+)", chief)]
    assert saved and max(saved) >= 600, chief[-3000:]


def test_embedding_variables_train_on_two_parameter_servers(ns: Namespace) -> None:
    ns.apply(example("embedding"))
    job = ns.wait_state("click-embedding", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
    chief = ns.logs("click-embedding-chief-0")
    assert re.search(r"chief:0 loss fell from [0-9.]+ to [0-9.]+", chief), chief[-3000:]
    stored = re.findall(r"ids stored: \{([^}]*)\}", chief)
    assert stored and all(int(n) > 0 for n in re.findall(r": (\d+)", stored[-1])), chief[-3000:]
