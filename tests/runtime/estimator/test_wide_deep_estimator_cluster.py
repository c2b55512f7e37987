"""examples/wide_deep_estimator.py as a TF_CONFIG cluster runs it: a chief process trains the
wide-and-deep Estimator with its variables on two PS task processes (which stop when it is done),
and the checkpoint it writes,
evaluated afterwards in this process (no cluster), scores the AUC the example reaches alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import cluster_processes

REPOSITORY = Path(__file__).resolve().parents[3]
EXAMPLE = REPOSITORY / "examples" / "wide_deep_estimator.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("wide_deep_estimator", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_chief_trains_it_over_two_ps_tasks(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    with cluster_processes.LocalCluster(str(tmp_path), {"chief": 1, "ps": 2}, start=False) as cluster:
        for index in (0, 1):
            cluster.task("ps", index).start(wait=False)
        chief = cluster.task("chief")
        chief.start(wait=False, command=[sys.executable, str(EXAMPLE), "--model-dir", str(model_dir),
                                         "--steps", "300"])
        assert chief.wait(timeout=240) == 0, chief.log()
        for index in (0, 1):  # they served the chief's variables until it finished
            cluster.task("ps", index).wait_for_output("every training task has finished", timeout=30)
    example = load_example()
    estimator = example.make_estimator(str(model_dir))
    assert estimator.get_variable_value("global_step") == 300
    assert estimator.get_variable_value("dnn/input_from_feature_columns/input_layer/site_embedding/"
                                        "embedding_weights").shape == (100, 8)
    metrics = estimator.evaluate(example.eval_input_fn)
    _, clicked, probability = example.EVAL_LOG
    assert metrics["auc"] > example.exact_auc(clicked.ravel(), probability) - 0.07, metrics
