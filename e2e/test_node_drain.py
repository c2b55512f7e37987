"""A node drained (``kubectl drain``) mid-training: the job's workers on it are evicted and run again
elsewhere, its PS stays (the job's PodDisruptionBudget refuses the eviction until the drain gives
up), the job finishes; the node is uncordoned afterwards.

A node lost outright (its kind container frozen with ``docker pause``) is test_node_loss.py's."""

from __future__ import annotations


from cluster_support import PROGRESS, Namespace, example, kubectl, wait_for

JOB = "digits-async"
JOB_TIMEOUT = 900
PACE_MS = 20
"""At most 50 steps/s per worker (test_faults.py says why the steps are paced)."""


def _control_plane_nodes() -> set[str]:
    out = kubectl("get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name").stdout
    return {line.removeprefix("node/") for line in out.split()}


def test_a_drain_moves_the_workers_and_waits_on_the_ps_budget(ns: Namespace) -> None:
    ns.apply(example("async", steps=6000, checkpoint_every=1000, log_every=500, pace_ms=PACE_MS))
    ns.wait_log(f"{JOB}-worker-0", PROGRESS, timeout=300)
    wait_for("every pod of the job to run", lambda: len(ns.placement(JOB)) == 3 and all(
        ns.pod(name).status.phase == "Running" for name in ns.placement(JOB)), 180)
    placement = ns.placement(JOB)
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
        assert ns.placement(JOB)[ps] == (ps_node, ps_uid), "the PS was moved despite its disruption budget"
        if moved:
            replaced = wait_for(f"the workers drained from {ps_node} to run on another node",
                                lambda: ns.running_elsewhere(JOB, moved, ps_node), 180)
            print("replaced:", replaced)
        job = ns.wait_state(JOB, ("Succeeded", "Failed"), JOB_TIMEOUT)
        assert job["status"]["state"] == "Succeeded", job["status"]
        assert job["status"].get("restarts", 0) == 0, "a drain is not a failure of the program"
    finally:
        kubectl("uncordon", ps_node, check=False)
