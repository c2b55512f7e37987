"""The objects a TrainingJob owns besides its pods and Services, and the pod defaults the operator sets.

- A **NetworkPolicy** (``<job>``): ingress to the job's pods only from the job's own pods
  (every port), plus their ``metrics`` port from the peers the operator is given
  (Prometheus, the operator itself for ``status.progress``). Anyone else who can reach
  a task's port could otherwise read or overwrite the model (issue 13).
- A **PodDisruptionBudget** (``<job>-ps``) over the parameter servers: a voluntary
  eviction (``kubectl drain``) waits rather than take a PS, whose loss interrupts every
  worker; pods that are not Ready may still be evicted, so a broken PS never blocks a drain.
- **Anti-affinity** of parameter servers across nodes (optional): one node's loss then
  takes one PS, not all.
- **Placement across nodes** (``node_placement``): the job's pods spread over nodes, and
  tolerations that bound how long they stay on a lost node.

Pure functions of the job and the operator's settings; ``cluster.ensure_objects`` creates
the objects once per job (owner references let garbage collection delete them with the job).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import node_placement

Obj = dict[str, Any]
ANTI_AFFINITY_MODES = ("off", "preferred", "required")
PEER_KEYS = frozenset({"podSelector", "namespaceSelector", "ipBlock"})
HOSTNAME_TOPOLOGY = node_placement.HOSTNAME_TOPOLOGY


@dataclasses.dataclass(frozen=True)
class JobObjectSettings:
    """What the operator adds to each job (flags of the same names, chart values)."""

    network_policy: bool = True
    """Create the job's NetworkPolicy."""
    metrics_peers: tuple[Mapping[str, Any], ...] = ()
    """NetworkPolicy peers (podSelector / namespaceSelector / ipBlock) allowed to the pods' metrics port."""
    ps_disruption_budget: bool = True
    """Create the PodDisruptionBudget over the job's parameter servers."""
    ps_anti_affinity: str = "off"
    """``off``, ``preferred`` or ``required``: keep a job's parameter servers on different nodes."""
    spread_over_nodes: bool = True
    """Spread each job's pods over nodes, unless a template sets its own affinity or topology spread."""
    node_lost_toleration_seconds: Optional[int] = 30
    """How long a pod stays on a NotReady or unreachable node before it is evicted; ``None``:
    Kubernetes' default (300 s, added by the API server)."""


def parse_metrics_peers(text: str) -> tuple[Mapping[str, Any], ...]:
    """``--network-policy-metrics-from``: a JSON list of NetworkPolicy peers; errors name the bad value."""
    try:
        peers = json.loads(text) if text.strip() else []
    except ValueError as e:
        raise ValueError(f"--network-policy-metrics-from {text!r} is not JSON ({e}); expected a list of "
                         f"NetworkPolicy peers such as [{{\"namespaceSelector\": {{\"matchLabels\": "
                         f"{{\"kubernetes.io/metadata.name\": \"monitoring\"}}}}}}]") from None
    if not isinstance(peers, list):
        raise ValueError(f"--network-policy-metrics-from {text!r} is not a list of NetworkPolicy peers")
    for peer in peers:
        if not isinstance(peer, dict) or not peer or not set(peer) <= PEER_KEYS \
                or not all(isinstance(v, dict) for v in peer.values()):
            raise ValueError(f"--network-policy-metrics-from: peer {json.dumps(peer)} is not a NetworkPolicy peer: "
                             f"an object with one or more of {', '.join(sorted(PEER_KEYS))}, each an object")
    return tuple(peers)


def _owned_metadata(job: Mapping[str, Any], name: str) -> Obj:
    meta = job["metadata"]
    return {"name": name, "namespace": meta["namespace"], "labels": {spec_lib.LABEL_JOB_NAME: meta["name"]},
            "ownerReferences": [manifests.owner_reference(job)]}


def network_policy(job: Mapping[str, Any], settings: JobObjectSettings) -> Obj:
    """The job's NetworkPolicy: its pods talk to each other; its metrics port is open to ``metrics_peers``."""
    job_name = job["metadata"]["name"]
    own_pods = {"podSelector": {"matchLabels": {spec_lib.LABEL_JOB_NAME: job_name}}}
    ingress: list[Obj] = [{"from": [copy.deepcopy(own_pods)]}]
    if settings.metrics_peers:
        ingress.append({"from": [copy.deepcopy(dict(p)) for p in settings.metrics_peers],
                        "ports": [{"port": spec_lib.METRICS_PORT_NAME, "protocol": "TCP"}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _owned_metadata(job, job_name),
        "spec": {"podSelector": own_pods["podSelector"], "policyTypes": ["Ingress"], "ingress": ingress},
    }


def ps_disruption_budget(job: Mapping[str, Any], job_spec: spec_lib.JobSpec) -> Optional[Obj]:
    """No voluntary eviction of a Ready parameter server; ``None`` for a job without one.

    ``minAvailable`` as the number of parameter servers, not ``maxUnavailable: 0``: for
    ``maxUnavailable`` (or a percentage) Kubernetes' disruption controller needs the pods'
    controller to have a scale subresource, which a TrainingJob has not, so it never
    processes such a budget: every eviction is refused as "still being processed", even
    after an administrator opens the budget."""
    if job_spec.replicas(spec_lib.ReplicaType.PS) == 0:
        return None
    job_name = job["metadata"]["name"]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _owned_metadata(job, f"{job_name}-ps"),
        "spec": {
            "minAvailable": job_spec.replicas(spec_lib.ReplicaType.PS),
            "selector": {"matchLabels": {spec_lib.LABEL_JOB_NAME: job_name,
                                         spec_lib.LABEL_REPLICA_TYPE: spec_lib.ReplicaType.PS.task_type}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def with_pod_defaults(pod: Mapping[str, Any], settings: JobObjectSettings) -> Obj:
    """The pod with the operator's scheduling defaults: spread over nodes and lost-node tolerations
    (``node_placement``), PS anti-affinity; a template's own placement wins."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    result = node_placement.with_placement(pod, settings.spread_over_nodes, settings.node_lost_toleration_seconds)
    if settings.ps_anti_affinity == "off" or labels.get(spec_lib.LABEL_REPLICA_TYPE) != "ps":
        return result
    affinity = result["spec"].setdefault("affinity", {})
    if "podAntiAffinity" in affinity:
        return result  # the template decides
    term = {"labelSelector": {"matchLabels": {spec_lib.LABEL_JOB_NAME: labels[spec_lib.LABEL_JOB_NAME],
                                              spec_lib.LABEL_REPLICA_TYPE: "ps"}},
            "topologyKey": HOSTNAME_TOPOLOGY}
    if settings.ps_anti_affinity == "required":
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    else:
        affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term}]}
    return result
