"""Where a job's pods run across nodes, and how soon they leave a node that is lost.

- **Spread over nodes**: a ``topologySpreadConstraints`` entry by ``kubernetes.io/hostname``
  over the job's pods (``maxSkew: 1``, ``whenUnsatisfiable: ScheduleAnyway``), so one node's
  loss takes part of a job rather than all of it, and the traffic between its tasks crosses
  the network as it does in production. A preference, not a rule: with a node down (its
  pods' replacements must go somewhere) or a single node, the pods still schedule. Set only
  when the pod's template says nothing of its own placement (``affinity``,
  ``topologySpreadConstraints``): a template that places its pods decides.
- **Lost-node tolerations**: ``node.kubernetes.io/not-ready`` and ``.../unreachable``
  (``NoExecute``) tolerated for a bounded time, so that the taint manager deletes the pods of
  a node that stopped answering after that time instead of Kubernetes' default 300 s; the
  operator then replaces them (docs/operator.md, "Node loss"). A template's own toleration of
  either key wins for that key.

Pure functions of a pod manifest; ``jobobjects.with_pod_defaults`` applies them.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import spec as spec_lib

Obj = dict[str, Any]
HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
LOST_NODE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def places_itself(template_spec: Mapping[str, Any]) -> bool:
    """Whether a pod's template chose its placement: then the operator adds no spreading."""
    return bool(template_spec.get("affinity")) or bool(template_spec.get("topologySpreadConstraints"))


def spread_over_nodes(pod: Obj) -> None:
    """Adds (in place) a preference to put the job's pods on different nodes."""
    job_name = pod["metadata"]["labels"][spec_lib.LABEL_JOB_NAME]
    pod["spec"]["topologySpreadConstraints"] = [{
        "maxSkew": 1,
        "topologyKey": HOSTNAME_TOPOLOGY,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {spec_lib.LABEL_JOB_NAME: job_name}},
    }]


def tolerate_lost_node_for(pod: Obj, seconds: int) -> None:
    """Adds (in place) tolerations of a NotReady or unreachable node for ``seconds``, for the
    taints the pod does not already tolerate."""
    tolerations: list[Obj] = pod["spec"].setdefault("tolerations", [])
    own = {t.get("key") for t in tolerations}
    for taint in LOST_NODE_TAINTS:
        if taint not in own:
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": seconds})


def parse_toleration_seconds(text: str) -> Optional[int]:
    """``--node-lost-toleration-seconds``: whole seconds >= 0, or ``off`` (Kubernetes' default, 300 s)."""
    if text.strip().lower() == "off":
        return None
    try:
        seconds = int(text)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise ValueError(f"--node-lost-toleration-seconds {text!r}: expected whole seconds >= 0 (how long a "
                         f"job's pods stay on a NotReady or unreachable node), or 'off'")
    return seconds


def with_placement(pod: Mapping[str, Any], spread: bool, lost_node_seconds: Optional[int]) -> Obj:
    """A copy of ``pod`` with the spreading and lost-node tolerations asked for."""
    result = copy.deepcopy(dict(pod))
    if spread and not places_itself(result["spec"]):
        spread_over_nodes(result)
    if lost_node_seconds is not None:
        tolerate_lost_node_for(result, lost_node_seconds)
    return result
