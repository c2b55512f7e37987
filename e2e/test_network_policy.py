"""Network isolation as a cluster enforces it: the NetworkPolicy the operator makes per TrainingJob
(docs/security.md) keeps pods outside the job off its tasks' gRPC and data-channel ports, and off
their metrics port unless the chart's values name them as where Prometheus runs; the job's own pods,
the operator and the suite's Prometheus (this machine, which e2e/cluster.sh gives the chart as an
ipBlock) get through. The kind cluster enforces policies with kube-router (e2e/node-image/); where
nothing enforces them, this test fails. The job's PS and worker run on different nodes (the operator
spreads a job's pods) and the probes on a node other than the PS's, so every connection checked
crosses the pod network between nodes."""

from __future__ import annotations

import ipaddress
import socket
import uuid
from typing import Any, Iterator

import pytest
import yaml

from cluster_support import (OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, Namespace, kubectl, pod_network_routed,
                             schedulable_nodes, wait_for)

JOB = "isolated"
GRPC_PORT, DATA_PORT, METRICS_PORT = 2222, 2223, 9090
# How long a connection attempt may take before it counts as dropped. A port the policy
# admits answers in milliseconds on one node.
CONNECT_TIMEOUT = 5.0
# Connects to host:port; prints "open", "timeout" (the SYN was dropped), "refused" or the error.
PROBE = """
import socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[3]))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("open")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print(f"error {e}")
"""


def _job_manifest() -> str:
    """1 PS + 1 worker training for far longer than the test runs (the namespace's deletion ends it)."""
    container = {"name": "tensorgrid", "image": "tensorgrid:0.1.0",
                 "command": ["python", "/app/examples/distributed_digits.py", "--steps", "10000000"]}
    replica = {"replicas": 1, "restartPolicy": "Never",
               "template": {"spec": {"containers": [dict(container, resources={"requests": {"cpu": "100m",
                                                                                           "memory": "256Mi"}})]}}}
    return yaml.safe_dump({"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": JOB},
                           "spec": {"replicaSpecs": {"PS": replica, "Worker": replica}}})


def _probe_pod(name: str, labels: dict[str, str], node: str) -> str:
    """A pod on ``node`` that only sleeps, from the runtime image (it has Python), to connect from."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{
            "name": "probe", "image": "tensorgrid:0.1.0", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}})


def _connect_from_pod(namespace: str, pod: str, address: str, port: int) -> str:
    """The outcome of a TCP connection from inside ``pod`` (``kubectl exec``) to address:port."""
    result = kubectl("-n", namespace, "exec", pod, "--", "python", "-c", PROBE, address, str(port),
                     str(CONNECT_TIMEOUT), timeout=60)
    return result.stdout.strip()


def _connect_from_here(address: str, port: int) -> str:
    """The outcome of a TCP connection from this machine, where the suite's Prometheus runs."""
    try:
        with socket.create_connection((address, port), timeout=CONNECT_TIMEOUT):
            return "open"
    except socket.timeout:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    except OSError as e:
        return f"error {e}"


def _eventually_open(what: str, connect: Any) -> None:
    """A connection the policy admits: retried briefly, as the enforcer learns a new pod's address
    from the API server's watch (until then the pod counts as outside any job)."""
    outcomes: list[str] = []

    def opened() -> bool:
        outcomes.append(connect())
        return outcomes[-1] == "open"

    try:
        wait_for(what, opened, 60, interval=1.0)
    except AssertionError as e:
        raise AssertionError(f"{e}; the attempts ended: {outcomes}") from None
    print(f"{what}: {' '.join(outcomes)}")


def _assert_blocked(what: str, outcome: str) -> None:
    print(f"{what}: {outcome}")
    assert outcome != "open", (f"{what} connected: the job's NetworkPolicy is not enforced (is the cluster's "
                               f"policy enforcer running? kubectl -n kube-system logs ds/kube-router)")


@pytest.fixture
def other_ns(ns: Namespace) -> Iterator[str]:
    """A second namespace, for pods of another team in the cluster."""
    name = f"{ns.name[:50]}-other-{uuid.uuid4().hex[:4]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


def _pod_ready(namespace: str, pod: str) -> bool:
    out = kubectl("-n", namespace, "get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0].ready}",
                  check=False)
    return out.stdout.strip() == "true"


def test_only_the_jobs_pods_reach_its_tasks(ns: Namespace, other_ns: str) -> None:
    ns.apply(_job_manifest())
    # The probes: a pod of the same namespace outside the job, one of another namespace, and one of
    # another namespace that carries the job's label (the policy admits the job's namespace only).
    probes = {"outsider": (ns.name, {"app": "outsider"}),
              "other-namespace": (other_ns, {"app": "outsider"}),
              "impostor": (other_ns, {"tensorgrid.io/job-name": JOB})}
    ps, worker = f"{JOB}-ps-0", f"{JOB}-worker-0"
    ns.wait_running(ps)
    ns.wait_running(worker)
    ps_node, worker_node = ns.pod(ps).spec.node_name, ns.pod(worker).spec.node_name
    assert ps_node != worker_node, f"the PS and the worker share node {ps_node}: the operator spreads a job's pods"
    probe_node = next(node for node in schedulable_nodes() if node != ps_node)
    for name, (namespace, labels) in probes.items():
        kubectl("-n", namespace, "apply", "-f", "-", stdin=_probe_pod(name, labels, probe_node))
    for name, (namespace, _) in probes.items():
        wait_for(f"probe pod {namespace}/{name} to be ready", lambda: _pod_ready(namespace, name), 180)
    policy = ns.kubectl("get", "networkpolicy", JOB, "-o", "json").stdout
    ps_ip = ns.pod(ps).status.pod_ip

    # The worker, a pod of the job, reaches every port of the PS (its training goes through them).
    for port in (GRPC_PORT, DATA_PORT, METRICS_PORT):
        _eventually_open(f"{worker} to connect to the PS's port {port}",
                         lambda: _connect_from_pod(ns.name, worker, ps_ip, port))

    # Nobody else reaches the gRPC and data-channel ports, nor the metrics port.
    for name, (namespace, _) in probes.items():
        for port in (GRPC_PORT, DATA_PORT, METRICS_PORT):
            _assert_blocked(f"pod {namespace}/{name} to {ps}:{port}", _connect_from_pod(namespace, name, ps_ip, port))

    # The metrics port is open to where the chart says Prometheus runs (this machine's address on
    # kind's network, an ipBlock of the policy), and to the operator (status.progress).
    metrics_rule = next(rule for rule in yaml.safe_load(policy)["spec"]["ingress"] if rule.get("ports"))
    cidrs = [peer["ipBlock"]["cidr"] for peer in metrics_rule["from"] if "ipBlock" in peer]
    assert cidrs, f"the job's NetworkPolicy admits no Prometheus address to the metrics port: {policy}"
    with pod_network_routed():
        here = _address_towards(ps_ip)
        assert any(ipaddress.ip_address(here) in ipaddress.ip_network(c) for c in cidrs), (
            f"this machine's address {here} is not among the metrics port's ipBlocks {cidrs}")
        _eventually_open(f"this machine ({here}) to reach the PS's metrics port",
                         lambda: _connect_from_here(ps_ip, METRICS_PORT))
        for port in (GRPC_PORT, DATA_PORT):
            _assert_blocked(f"this machine ({here}) to {ps}:{port}", _connect_from_here(ps_ip, port))
    operator = f"deployment/{OPERATOR_DEPLOYMENT}"
    _eventually_open("the operator to reach the PS's metrics port", lambda: _connect_from_pod(
        OPERATOR_NAMESPACE, operator, ps_ip, METRICS_PORT))
    _assert_blocked(f"the operator to {ps}:{GRPC_PORT}",
                    _connect_from_pod(OPERATOR_NAMESPACE, operator, ps_ip, GRPC_PORT))
    assert ns.pod(worker).status.phase == "Running"


def _address_towards(address: str) -> str:
    """This machine's source address for packets to ``address`` (a UDP socket sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))
        return str(s.getsockname()[0])
