"""A small cluster for tests of a real gang scheduler: KWOK nodes of a few CPUs that only the test's pods
select, scheduler-plugins' Coscheduling beside the control plane's scheduler, and an operator with a gang
scheduler watching a namespace of its own; and the jobs of one-CPU pods those tests place on it.

Why it exists: the coscheduling tests and the scaled gang job's test set up the same cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from typing import Any, Iterator

from gang_scheduler import running_scheduler_plugins
from kwok_nodes import KwokNodes, running_kwok, tolerate_kwok
from operator_cluster import ControlPlane, Namespace, created_namespace, job_manifest, operator_settings
from operator_cluster import running_operator
from tensorgrid_operator.resources import podgroups

NODE_CPUS = "2"


@dataclasses.dataclass
class GangCluster:
    namespace: Namespace
    kwok: KwokNodes
    node_label: dict[str, str]


@contextlib.contextmanager
def gang_cluster(cp: ControlPlane, gang: podgroups.GangSettings, nodes: int) -> Iterator[GangCluster]:
    """KWOK nodes of ``NODE_CPUS`` CPUs that only this test's pods select, scheduler-plugins, and an operator
    with ``gang`` watching a namespace of its own."""
    tag = uuid.uuid4().hex[:8]
    node_label = {"tensorgrid.io/gang-test": tag}
    with created_namespace(cp, f"tgs-{tag}") as namespace, \
            running_kwok(cp, nodes, prefix=f"gang-{tag}", allocatable={"cpu": NODE_CPUS, "memory": "8Gi"},
                         labels=node_label) as kwok, running_scheduler_plugins(cp):
        settings = dataclasses.replace(operator_settings(cp, (namespace.name,)), gang=gang)
        with running_operator(settings):
            yield GangCluster(namespace, kwok, node_label)


def one_cpu_job(name: str, ps: int, workers: int, node_label: dict[str, str]) -> dict[str, Any]:
    """A job of one-CPU pods that run only on the test's nodes."""
    manifest = tolerate_kwok(job_manifest(name, ps=ps, workers=workers))
    for replica in manifest["spec"]["replicaSpecs"].values():
        pod_spec = replica["template"]["spec"]
        pod_spec["nodeSelector"] = node_label
        for container in pod_spec["containers"]:
            container["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    return manifest


def bound(namespace: Namespace, job: str) -> dict[str, str]:
    """The job's pods that are bound to a node: name -> node."""
    return {name: pod["spec"]["nodeName"] for name, pod in namespace.pods(job).items() if pod["spec"].get("nodeName")}
