"""A node lost mid-training, as a machine that stops answering is lost: the kind node's container is
frozen (``docker pause``). Kubernetes marks the node NotReady, evicts the job's pods on it after their
toleration (the operator sets ``--node-lost-toleration-seconds``, 30 s), the operator force-deletes
them once they are stuck Terminating (e2e/cluster.sh installs the chart with
``operator.forceDeleteStuckPods``) and creates them again on another node; the job finishes, and
the global step never goes back below the checkpoint written before the loss (the volume follows the
pods: every kind node mounts the same directory). The node is resumed afterwards, for the rest of the
suite. docs/operator.md ("Node loss") states the bound checked here.

And a node drained (``kubectl drain``): the job's workers on it are evicted and run again elsewhere,
its PS stays (the job's PodDisruptionBudget refuses the eviction until the drain gives up), the job
finishes; the node is uncordoned afterwards."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

from cluster_support import OPERATOR_NAMESPACE, PROGRESS, Namespace, example, global_steps, kubectl, wait_for

JOB = "digits-async"
JOB_TIMEOUT = 900
PACE_MS = 20
"""At most 50 steps/s per worker (test_faults.py says why the steps are paced)."""
# From the freeze to the lost pods' replacements running elsewhere: node-monitor-grace-period (50 s)
# + the pods' toleration (30 s) + their grace period (30 s) + stuckTerminatingSeconds (10 s) + the
# operator's look and the new pods' start; docs/operator.md states it as about 2.5 minutes. The rest
# is the slack a loaded 2-core machine needs.
REPLACEMENT_BOUND_S = 300
CHECKPOINT = r"Saved checkpoint for step (\d+)"


def _placement(ns: Namespace) -> dict[str, tuple[str, str]]:
    """The job's pods: name -> (node, uid), for pods that exist and are not terminating."""
    return {p.metadata.name: (p.spec.node_name or "", p.metadata.uid) for p in ns.pods(f"tensorgrid.io/job-name={JOB}")
            if not p.metadata.deletion_timestamp}


def _control_plane_nodes() -> set[str]:
    out = kubectl("get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name").stdout
    return {line.removeprefix("node/") for line in out.split()}


def _operator_nodes() -> set[str]:
    out = kubectl("-n", OPERATOR_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=tensorgrid-operator",
                  "-o", "jsonpath={.items[*].spec.nodeName}").stdout
    return set(out.split())


def _node_ready(node: str) -> bool:
    out = kubectl("get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
    return out.stdout.strip() == "True"


def _running_elsewhere(ns: Namespace, lost: dict[str, tuple[str, str]], node: str) -> Any:
    """The replacements of the lost pods, once each runs on a node other than ``node``."""
    now = {p.metadata.name: p for p in ns.pods(f"tensorgrid.io/job-name={JOB}")}
    replaced = {}
    for name, (_, uid) in lost.items():
        pod = now.get(name)
        if pod is None or pod.metadata.uid == uid or pod.status.phase != "Running" or pod.spec.node_name == node:
            return None
        replaced[name] = pod.spec.node_name
    return replaced


def test_the_pods_of_a_lost_node_are_replaced_elsewhere_and_the_job_finishes(ns: Namespace) -> None:
    ns.apply(example("async", steps=12000, checkpoint_every=500, log_every=500, pace_ms=PACE_MS))
    chief = f"{JOB}-worker-0"
    ns.wait_log(chief, PROGRESS, timeout=300)
    wait_for("every pod of the job to run", lambda: len(_placement(ns)) == 3 and all(
        ns.pod(name).status.phase == "Running" for name in _placement(ns)), 180)
    placement = _placement(ns)
    nodes = {node for node, _ in placement.values()}
    print("placement:", {name: node for name, (node, _) in placement.items()})
    # The operator spreads the job's pods over the nodes (topology spread by hostname).
    assert len(nodes) >= 2, f"the job's pods all run on one node: {placement}"
    ps_node = placement[f"{JOB}-ps-0"][0]
    # The node to lose: one with workers and not the PS (a frozen PS is another story: docs/operator.md),
    # nor the control plane (the cluster's API), nor the operator's (e2e/cluster.sh puts it on the
    # control plane).
    candidates = sorted(nodes - {ps_node} - _control_plane_nodes() - _operator_nodes())
    assert candidates, f"no worker node without the PS holds a pod of the job: {placement}"
    victim = candidates[0]
    lost = {name: value for name, value in placement.items() if value[0] == victim}
    wait_for("a checkpoint", lambda: re.search(CHECKPOINT, ns.logs(chief)), 300)
    saved_before = max(int(s) for s in re.findall(CHECKPOINT, ns.logs(chief)))
    survivors = {name: ns.logs(name) for name in placement if name not in lost}

    print(f"freezing node {victim} (pods {sorted(lost)}); last checkpoint step {saved_before}")
    subprocess.run(["docker", "pause", victim], check=True)
    frozen_at = time.monotonic()
    try:
        wait_for(f"node {victim} to be NotReady", lambda: not _node_ready(victim), 120)
        print(f"node {victim} NotReady after {time.monotonic() - frozen_at:.0f}s")
        replaced = wait_for(f"the pods of node {victim} to run on another node", lambda: _running_elsewhere(
            ns, lost, victim), REPLACEMENT_BOUND_S, interval=2.0)
        print(f"replaced after {time.monotonic() - frozen_at:.0f}s: {replaced}")
        job = ns.wait_state(JOB, ("Succeeded", "Failed"), JOB_TIMEOUT)
        assert job["status"]["state"] == "Succeeded", job["status"]
        assert job["status"].get("restarts", 0) == 0, "a lost node is not a failure of the program"
        logs = {name: ns.logs(name) for name in placement}
    finally:
        subprocess.run(["docker", "unpause", victim], check=False)
        wait_for(f"node {victim} to be Ready again", lambda: _node_ready(victim), 180)

    for name in lost:
        log = logs[name]
        restored = re.search(r"Restoring the model from checkpoint \S*?-(\d+)\b", log)
        if name == chief:
            assert restored, f"the new chief did not restore the checkpoint:\n{log}"
        if restored:
            assert int(restored.group(1)) >= saved_before, (
                f"{name} restored checkpoint step {restored.group(1)}, older than step {saved_before} saved before")
        steps = global_steps(log[restored.end():] if restored else log)
        assert steps and min(steps) >= saved_before, (
            f"{name}'s global step went back below the checkpoint's {saved_before}: {steps[:5]}")
    for name, before in survivors.items():
        steps = global_steps(logs[name][len(before):])
        assert all(step >= saved_before for step in steps), (
            f"{name}'s global step went back below the checkpoint's {saved_before}: {steps[:5]}")


def test_a_drain_moves_the_workers_and_waits_on_the_ps_budget(ns: Namespace) -> None:
    ns.apply(example("async", steps=6000, checkpoint_every=1000, log_every=500, pace_ms=PACE_MS))
    ns.wait_log(f"{JOB}-worker-0", PROGRESS, timeout=300)
    wait_for("every pod of the job to run", lambda: len(_placement(ns)) == 3 and all(
        ns.pod(name).status.phase == "Running" for name in _placement(ns)), 180)
    placement = _placement(ns)
    ps = f"{JOB}-ps-0"
    ps_node, ps_uid = placement[ps]
    assert ps_node not in _control_plane_nodes(), f"the PS runs on the control plane: {placement}"
    moved = {name: value for name, value in placement.items() if value[0] == ps_node and name != ps}
    print("placement:", {name: node for name, (node, _) in placement.items()}, "draining", ps_node)
    try:
        # The job's PodDisruptionBudget keeps the drain off the Ready PS: kubectl retries its
        # eviction until the timeout, while the node's other pods are evicted.
        drain = kubectl("drain", ps_node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=45s",
                        check=False, timeout=180)
        said = drain.stdout + drain.stderr
        print(said[-2000:])
        assert drain.returncode != 0, f"the drain took the PS despite its disruption budget:\n{said}"
        assert "disruption budget" in said, said
        assert _placement(ns)[ps] == (ps_node, ps_uid), "the PS was moved despite its disruption budget"
        if moved:
            replaced = wait_for(f"the workers drained from {ps_node} to run on another node",
                                lambda: _running_elsewhere(ns, moved, ps_node), 180)
            print("replaced:", replaced)
        job = ns.wait_state(JOB, ("Succeeded", "Failed"), JOB_TIMEOUT)
        assert job["status"]["state"] == "Succeeded", job["status"]
        assert job["status"].get("restarts", 0) == 0, "a drain is not a failure of the program"
    finally:
        kubectl("uncordon", ps_node, check=False)
