"""KWOK nodes on the test control plane: pods run, are deleted and are lost as on real nodes.

The other operator tests play the kubelet by patching pod status. Here ``kwok`` (built by
``hack/tools.sh --with-kwok``, behaviour in ``hack/kwok-stages.yaml``) plays it for a few
Node objects: the scheduler binds pods to them, KWOK runs them (Running, a pod IP), ends
a deleted pod once its deletion starts, and renews each node's Lease. A node KWOK stops
managing (``KwokNodes.lose``) is a lost node: its pods stay as they are and a pod deleted
there stays Terminating, as on a node whose kubelet died.

The nodes are tainted (``TAINT``): only pods that tolerate it (``tolerate_kwok``) go there,
so the other tests still see a cluster without nodes. Without the kwok binary the tests
skip, except under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import tempfile
from typing import Any, Iterator, Optional


import built_tools
from operator_cluster import ControlPlane, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[3]
STAGES = ROOT / "hack" / "kwok-stages.yaml"
# KWOK manages the nodes with this label value; any other value makes a node lost.
MANAGED_LABEL = "tensorgrid.io/kwok-node"
MANAGED = "managed"
TAINT = {"key": "tensorgrid.io/kwok-node", "value": "simulated", "effect": "NoSchedule"}


def kwok_binary() -> pathlib.Path:
    """The kwok binary of hack/tools.sh; skips (fails under CI=true) when it was not built."""
    return built_tools.built("--with-kwok", "kwok")[0]


def tolerate_kwok(manifest: dict[str, Any]) -> dict[str, Any]:
    """The TrainingJob with every replica's pods tolerating the KWOK nodes' taint."""
    for replica in manifest["spec"]["replicaSpecs"].values():
        pod_spec = replica["template"].setdefault("spec", {})
        pod_spec.setdefault("tolerations", []).append({**TAINT, "operator": "Equal"})
    return manifest


class KwokNodes:
    """The running kwok and its nodes."""

    def __init__(self, cp: ControlPlane, names: list[str], process: "subprocess.Popen[bytes]", log: pathlib.Path,
                 allocatable: Optional[dict[str, str]], labels: dict[str, str]) -> None:
        self.cp = cp
        self.names = names
        self.process = process
        self.log = log
        self.allocatable = allocatable
        self.labels = labels

    def add(self, *names: str) -> None:
        """New nodes, Ready (with the block's allocatable resources) when this returns."""
        for name in names:
            self.cp.core.create_node(_node(name, self.labels))
            self.names.append(name)
        wait_for(lambda: self._ready(names), 60, f"KWOK nodes {', '.join(names)} to be Ready")
        if self.allocatable is not None:
            # After Ready: KWOK's node stage (hack/kwok-stages.yaml) writes its own figures until then.
            resources = {**self.allocatable, "pods": "110"}
            for name in names:
                self.cp.core.patch_node_status(name, {"status": {"allocatable": resources, "capacity": resources}})

    def _ready(self, names: tuple[str, ...]) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"kwok exited ({self.process.returncode}): {self.log.read_text()[-2000:]}")
        ready = 0
        for node in self.cp.core.list_node(label_selector=f"{MANAGED_LABEL}={MANAGED}").items:
            conditions = {c.type: c.status for c in node.status.conditions or []}
            ready += node.metadata.name in names and conditions.get("Ready") == "True"
        return ready == len(names)

    def lose(self, node: str) -> None:
        """KWOK stops managing the node: no kubelet answers for it any more."""
        self.cp.core.patch_node(node, {"metadata": {"labels": {MANAGED_LABEL: "lost"}}})

    def restore(self, node: str) -> None:
        """KWOK manages the node again: its kubelet is back."""
        self.cp.core.patch_node(node, {"metadata": {"labels": {MANAGED_LABEL: MANAGED}}})


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**labels, MANAGED_LABEL: MANAGED, "kubernetes.io/hostname": name,
                                                  "type": "kwok"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [TAINT]}}


@contextlib.contextmanager
def running_kwok(cp: ControlPlane, nodes: int, prefix: str = "kwok-node",
                 allocatable: Optional[dict[str, str]] = None,
                 labels: Optional[dict[str, str]] = None) -> Iterator[KwokNodes]:
    """kwok managing ``nodes`` new Ready nodes until the block ends; then the nodes (and any added) are deleted.

    ``allocatable``: what each node offers the scheduler (e.g. ``{"cpu": "2"}``); else 1000 CPUs and 1 TiB.
    ``labels``: the nodes' own labels, for pods to select them.
    """
    binary = kwok_binary()
    log = tempfile.NamedTemporaryFile(prefix="kwok-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [str(binary), "--kubeconfig", cp.kubeconfig, "--config", str(STAGES), "--manage-all-nodes=false",
         f"--manage-nodes-with-label-selector={MANAGED_LABEL}={MANAGED}", "--cidr=10.128.0.0/16",
         "--node-ip=10.127.0.1", "--node-lease-duration-seconds=40", "--server-address="],
        stdout=log, stderr=subprocess.STDOUT)
    kwok = KwokNodes(cp, [], process, pathlib.Path(log.name), allocatable, dict(labels or {}))
    try:
        kwok.add(*(f"{prefix}-{i}" for i in range(nodes)))
        yield kwok
    finally:
        for name in kwok.names:
            with contextlib.suppress(Exception):
                cp.core.delete_node(name)
        built_tools.stop(process)
        log.close()
