"""A node drained (``kubectl drain``) mid-training: the job's workers on it are evicted and run again
elsewhere, its PS stays (the job's PodDisruptionBudget refuses the eviction until the drain gives
up), the job finishes; the node is uncordoned afterwards.

A node lost outright (its kind container frozen with ``docker pause``) is test_node_loss.py's."""

from __future__ import annotations

from typing import Any

from cluster_support import PROGRESS, Namespace, example, kubectl, wait_for

JOB = "digits-async"
JOB_TIMEOUT = 900
PACE_MS = 20
"""At most 50 steps/s per worker (test_faults.py says why the steps are paced)."""


def _placement(ns: Namespace) -> dict[str, tuple[str, str]]:
    """The job's pods: name -> (node, uid), for pods that exist and are not terminating."""
    return {p.metadata.name: (p.spec.node_name or "", p.metadata.uid) for p in ns.pods(f"tensorgrid.io/job-name={JOB}")
            if not p.metadata.deletion_timestamp}


def _control_plane_nodes() -> set[str]:
    out = kubectl("get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name").stdout
    return {line.removeprefix("node/") for line in out.split()}


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
