"""A control dependency on a placeholder is satisfied by feeding it, as in TensorFlow
(``subgraph.cc``'s FeedInputs moves a fed Placeholder's control edges to the feed): the
placeholder's kernel, which fails when it runs, never runs. ``tf.metrics.mean`` of a
placeholder builds such an edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(120)


def run_with_control_edge(lib: Any, target: str = "") -> Any:
    graph = lib.Graph()
    with graph.as_default():
        x = lib.placeholder(lib.float32, [None], name="x")
        with lib.device("/job:ps/task:0" if target else None):
            total = lib.Variable(0.0, name="total")
        with lib.control_dependencies([x]):
            update = lib.assign_add(total, 1.0)
        with lib.Session(target, graph=graph) as session:
            session.run(lib.global_variables_initializer())
            return session.run(update, {x: np.ones(2, np.float32)})


@pytest.mark.parametrize("name", ["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def test_feeding_a_placeholder_satisfies_a_control_dependency_on_it(name: str, request: pytest.FixtureRequest) -> None:
    lib = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
    assert run_with_control_edge(lib) == 1.0


def test_the_control_dependency_on_a_fed_placeholder_across_tasks(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        assert run_with_control_edge(tensorgrid, cluster.target("worker")) == 1.0
