"""The README's Kubernetes quick start, as written: `kubectl apply -f examples/trainingjob-*.yaml`
on a cluster where `helm install` put the operator; each job trains to success."""

from __future__ import annotations

import pytest

from cluster_support import Namespace, example, loss_values, wait_for

# One job at a time on a 2-core node: pulling nothing, starting 3-5 pods, training 1,000-1,500 steps.
JOB_TIMEOUT = 600

EXAMPLES = {
    # example: (job name, the pod whose log shows the loss)
    "async": ("digits-async", "digits-async-worker-0"),
    "sync": ("digits-sync", "digits-sync-worker-0"),
    "chief": ("digits-chief", "digits-chief-chief-0"),
    # A TF1 program with tf.app.flags and tf.train.Supervisor, unchanged (issue 24: started by the operator).
    "supervisor": ("digits-supervisor", "digits-supervisor-worker-0"),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_trains_to_success(ns: Namespace, name: str) -> None:
    job_name, chief_pod = EXAMPLES[name]
    ns.apply(example(name))
    job = ns.wait_state(job_name, ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]

    log = ns.logs(chief_pod)
    losses = loss_values(log)
    assert len(losses) >= 2 and losses[-1] < losses[0], f"the loss did not fall in {chief_pod}'s log:\n{log}"
    assert "test accuracy" in log, log

    # cleanPodPolicy Running (the default): no PS is left running once the job ended. A pod
    # whose container just exited may still read Running until the kubelet updates its
    # phase (seconds): the operator leaves such a pod be (its log is the user's), so wait.
    def running() -> list[str]:
        return [p.metadata.name for p in ns.pods() if p.status.phase in ("Running", "Pending")
                and not p.metadata.deletion_timestamp]

    wait_for("no pod of the job to be running", lambda: not running(), 60)

    # `kubectl get tj` shows its columns filled.
    table = ns.kubectl("get", "tj", job_name).stdout.splitlines()
    header, row = table[0].split(), table[1].split()
    assert header[:5] == ["NAME", "STATE", "WORKERS", "PS", "RESTARTS"], header
    assert row[0] == job_name and row[1] == "Succeeded", row
    assert all(cell != "<none>" for cell in row), row
