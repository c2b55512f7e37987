"""A gang-scheduled job scaled with ``kubectl scale`` on a real API server: its PodGroup's ``minMember``
follows the worker count (every replica, without minAvailable or minReplicas), patched before the
workers are added or removed and accepted by the scheduler's own CRD, with a ``ResizedPodGroup``
event; with ``minReplicas`` it stays where it was made. No gang scheduler runs: the pods stay
Pending, which the scaling does not need (an unbound pod is deleted at once)."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from typing import Any, Iterator, Optional

import pytest

from gang_scheduler import PLUGINS_CRD, VOLCANO_CRD
from gang_scheduler import install_crds
from operator_cluster import ControlPlane, Namespace, created_namespace, job_manifest, operator_settings
from operator_cluster import running_operator, wait_for
from tensorgrid_operator.resources import podgroups

pytestmark = pytest.mark.controlplane


@contextlib.contextmanager
def _gang_namespace(cp: ControlPlane, gang: podgroups.GangSettings) -> Iterator[Namespace]:
    """A namespace of its own, served by an operator with this gang scheduler (not the shared operator's tg-*)."""
    install_crds(cp, VOLCANO_CRD, PLUGINS_CRD)
    with created_namespace(cp, f"tgr-{uuid.uuid4().hex[:8]}") as namespace:
        with running_operator(dataclasses.replace(operator_settings(cp, (namespace.name,)), gang=gang)):
            yield namespace


def _min_member(namespace: Namespace, gang: podgroups.GangSettings, name: str) -> Optional[int]:
    api = podgroups.APIS[gang.scheduler]
    group: dict[str, Any] = namespace.cp.custom.get_namespaced_custom_object(
        api.group, api.version, namespace.name, api.plural, name)
    return int(group["spec"]["minMember"])


def _scale(namespace: Namespace, job: str, replicas: int) -> None:
    scaled = namespace.cp.kubectl("scale", f"tj/{job}", "-n", namespace.name, f"--replicas={replicas}", check=False)
    assert scaled.returncode == 0, scaled.stderr


def _resized(namespace: Namespace, job: str) -> list[str]:
    """The ResizedPodGroup events of the job, each to its first comma, in order of their text."""
    return sorted(str(e["message"]).split(",")[0] for e in namespace.events(job) if e["reason"] == "ResizedPodGroup")


def _workers(count: int, job: str) -> set[str]:
    return {f"{job}-ps-0"} | {f"{job}-worker-{i}" for i in range(count)}


@pytest.mark.parametrize("gang", [podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS),
                                  podgroups.GangSettings(podgroups.VOLCANO)], ids=["scheduler-plugins", "volcano"])
def test_kubectl_scale_resizes_the_pod_group(controlplane: ControlPlane, gang: podgroups.GangSettings) -> None:
    with _gang_namespace(controlplane, gang) as namespace:
        namespace.apply(job_manifest("gang", ps=1, workers=2))
        namespace.wait_pods("gang", _workers(2, "gang"))
        assert _min_member(namespace, gang, "gang") == 3

        _scale(namespace, "gang", 4)
        namespace.wait_pods("gang", _workers(4, "gang"))
        assert _min_member(namespace, gang, "gang") == 5, "patched before the new workers were made"
        _scale(namespace, "gang", 1)
        wait_for(lambda: set(namespace.pods("gang")) == _workers(1, "gang"), 30, "workers 1-3 removed",
                 lambda: sorted(namespace.pods("gang")))
        assert _min_member(namespace, gang, "gang") == 2

        wanted = ["PodGroup gang: minMember 3 -> 5", "PodGroup gang: minMember 5 -> 2"]
        wait_for(lambda: _resized(namespace, "gang") == wanted, 10, f"events {wanted}",
                 lambda: _resized(namespace, "gang"))


def test_a_job_with_min_replicas_keeps_its_pod_group_size(controlplane: ControlPlane) -> None:
    gang = podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS)
    with _gang_namespace(controlplane, gang) as namespace:
        manifest = job_manifest("bounded", ps=1, workers=2)
        manifest["spec"]["replicaSpecs"]["Worker"].update(minReplicas=1, maxReplicas=4)
        namespace.apply(manifest)
        namespace.wait_pods("bounded", _workers(2, "bounded"))
        _scale(namespace, "bounded", 4)
        namespace.wait_pods("bounded", _workers(4, "bounded"))
        assert _min_member(namespace, gang, "bounded") == 2, "the PS and minReplicas workers"
        assert _resized(namespace, "bounded") == []
