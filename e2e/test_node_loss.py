"""A worker node lost mid-training: its kind container frozen (``docker pause``), as a node that
stops answering without a word (power loss, a hung kernel, a cut cable) is lost. The node goes
NotReady, the job's pods on it are deleted by the taint manager, stay Terminating (their kubelet
cannot confirm it), are force-deleted by the operator (the suite's chart runs it with
``operator.forceDeleteStuckPods=true``, ``operator.stuckTerminatingSeconds=10``) and run again on
the other node; the replacement trains (the PS, which still holds connections to the frozen
process that the frozen node's kernel acknowledges, reaches the replacement), the global step
never goes below the last checkpoint, the job succeeds. The node is resumed and Ready again
afterwards, whatever happened: the rest of the suite runs on this cluster.

The bounds are docs/operator.md's ("Node loss"): NotReady within the node controller's grace
period (50 s), the pods running elsewhere after that plus their toleration (30 s), grace period
(30 s) and the operator's 10 s, plus their start; each is given room for a loaded machine."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Optional

import pytest

from cluster_support import PROGRESS, REPO, Namespace, example, global_steps, kubectl, wait_for

JOB = "digits-async"
PACE_MS = 50
"""At most 20 steps/s per worker (test_faults.py says why the steps are paced); a loaded 2-core
machine made 15-23 steps/s with 20 ms."""
STEPS = 6000
"""About 1000 steps before the freeze; while a worker is lost, the other makes at most 20 steps/s, so
the job outlasts a loss of 250 s (NotReady, replaced, first step: 217 s at a load of 33) with steps
left for the replacement."""
STEPS_PS_LOST = 2500
"""A lost PS stops every step until its replacement runs, and training goes on from the checkpoint
(about step 500): fewer steps make the same test."""
CHECKPOINT_EVERY = 500
LOG_EVERY = 50
"""Each worker logs its global step every 50 of its steps: the replacement's first step is seen within seconds."""
NOT_READY_WITHIN = 120
"""The node controller's grace period (50 s) and its next look, on a loaded machine."""
REPLACED_WITHIN = 300
"""After the freeze: NotReady (50 s), toleration (30 s), grace period (30 s), the operator's
stuck-terminating delay (10 s), the replacement's start; 2.5 minutes on an idle machine."""
FIRST_STEP_WITHIN = 150
"""After the replacement runs: its session created and the PS's calls sent to it rather than to
the frozen process (docs/limits.md, "Peers that vanish, restart or stall": about 40 s)."""
JOB_TIMEOUT = 900
VOLUMES = REPO / ".cache" / "e2e" / "volumes"
"""Every node's /var/local-volumes (e2e/cluster.sh): the job's checkpoints, seen from here."""


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def _node_ready(node: str) -> str:
    """The node's Ready condition: "True", "False" or "Unknown" (a node that stopped reporting)."""
    return kubectl("get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}").stdout


def _last_checkpoint_step(ns: Namespace) -> int:
    """The global step of the newest checkpoint the chief wrote on the job's volume (0: none yet)."""
    claim = ns.core.read_namespaced_persistent_volume_claim(f"{JOB}-checkpoints", ns.name)
    state = VOLUMES / f"pvc-{claim.metadata.uid}" / "checkpoint"  # tensorgrid-local-volumes' naming
    found = re.search(r'^model_checkpoint_path: ".*?-(\d+)"', state.read_text(), re.M) if state.exists() else None
    return int(found.group(1)) if found else 0


def _resume(node: str) -> None:
    """The node's container running again, and the node Ready (the kubelet reports again)."""
    state = _docker("inspect", "-f", "{{.State.Status}}", node, check=False).stdout.strip()
    if state == "paused":
        _docker("unpause", node)
    wait_for(f"node {node} to be Ready again", lambda: _node_ready(node) == "True", 180)


def _trains_again(ns: Namespace, replaced: dict[str, str], lost_ps: bool) -> bool:
    """Whether every lost worker's replacement logged a step and, when the PS was lost, the chief
    logged one after restoring the checkpoint into the new PS."""
    if lost_ps:
        chief = ns.logs(f"{JOB}-worker-0")
        restored = re.search(RESTORED, chief)
        if not restored or not global_steps(chief[restored.end():]):
            return False
    return all(global_steps(ns.logs(name)) for name in replaced if "-worker-" in name)


RESTORED = r"Restoring the model from checkpoint \S*?-(\d+)\b"


@pytest.mark.parametrize("lost", ["worker", "ps"])
def test_a_frozen_node_loses_its_pods_to_the_other_node(ns: Namespace, lost: str) -> None:
    """``worker``: the node of a worker without the PS (the PS calls the replacement rather than the
    frozen process); ``ps``: the PS's node (the chief restores the checkpoint into the new PS)."""
    ns.apply(example("async", steps=STEPS if lost == "worker" else STEPS_PS_LOST, checkpoint_every=CHECKPOINT_EVERY, log_every=LOG_EVERY,
                     pace_ms=PACE_MS))
    ns.wait_log(f"{JOB}-worker-0", PROGRESS, timeout=300)
    wait_for("every pod of the job to run", lambda: len(ns.placement(JOB)) == 3 and all(
        ns.pod(name).status.phase == "Running" for name in ns.placement(JOB)), 180)
    wait_for("a first checkpoint", lambda: _last_checkpoint_step(ns), 120)
    placement = ns.placement(JOB)
    ps_node = placement[f"{JOB}-ps-0"][0]
    lost_node: Optional[str] = ps_node if lost == "ps" else next(
        (node for node, _ in placement.values() if node != ps_node), None)
    assert lost_node, f"no node holds a worker without the PS (the operator spreads a job's pods): {placement}"
    lost_pods = {name: value for name, value in placement.items() if value[0] == lost_node}
    print("placement:", {name: node for name, (node, _) in placement.items()}, "freezing", lost_node)
    try:
        checkpoint = _last_checkpoint_step(ns)
        frozen_at = time.monotonic()
        _docker("pause", lost_node)
        wait_for(f"node {lost_node} to be NotReady", lambda: _node_ready(lost_node) != "True", NOT_READY_WITHIN)
        not_ready_after = time.monotonic() - frozen_at
        replaced = wait_for(f"the pods of {lost_node} to run on another node",
                            lambda: ns.running_elsewhere(JOB, lost_pods, lost_node), REPLACED_WITHIN)
        replaced_after = time.monotonic() - frozen_at
        wait_for(f"{', '.join(replaced)} replaced, training again", lambda: _trains_again(
            ns, replaced, lost == "ps"), FIRST_STEP_WITHIN, interval=1.0)
        first_step_after = time.monotonic() - frozen_at
        print(f"{lost_node} frozen with {checkpoint=}: NotReady after {not_ready_after:.0f} s, {replaced} running "
              f"after {replaced_after:.0f} s, training again after {first_step_after:.0f} s")
        job = ns.wait_state(JOB, ("Succeeded", "Failed"), JOB_TIMEOUT)
        assert job["status"]["state"] == "Succeeded", job["status"]
        for name in replaced:
            steps = global_steps(ns.logs(name))
            assert min(steps, default=checkpoint) >= checkpoint, \
                f"{name}'s replacement logged global steps below the checkpoint's {checkpoint}: {steps[:5]}"
        if lost == "ps":
            chief = ns.logs(f"{JOB}-worker-0")
            restored = re.search(RESTORED, chief)
            assert restored and int(restored.group(1)) >= checkpoint, f"no restore of checkpoint {checkpoint}:\n{chief}"
            after = global_steps(chief[restored.end():])
            assert min(after) >= int(restored.group(1)), \
                f"the global step went back below the restored checkpoint's {restored.group(1)}: {after[:5]}"
    finally:
        _resume(lost_node)
