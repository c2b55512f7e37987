"""The end-to-end suite's view of its kind cluster (made by ``e2e/cluster.sh up``), reached as a
user reaches it: ``kubectl``, the Kubernetes Python client, the example manifests."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import subprocess
import time
from typing import Any, Callable, Iterator, Optional

import kubernetes
import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent
KUBECONFIG = os.environ.get("E2E_KUBECONFIG", str(REPO / ".cache" / "e2e" / "kubeconfig"))
OPERATOR_NAMESPACE = "tensorgrid-system"
OPERATOR_DEPLOYMENT = "tensorgrid-tensorgrid-operator"
GROUP, VERSION, PLURAL = "tensorgrid.io", "v1", "trainingjobs"
# The pod network of e2e/kind-config.yaml.
POD_SUBNET = "10.244.0.0/16"


def _k8s_bin() -> str:
    out = subprocess.run([str(REPO / "hack" / "build-kubernetes.sh"), "--print-bin-dir"], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


KUBECTL = os.path.join(_k8s_bin(), "kubectl")


def kubectl(*args: str, check: bool = True, stdin: Optional[str] = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``kubectl`` against the e2e cluster; raises with its stderr when ``check`` and it fails."""
    result = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, *args], input=stdin, capture_output=True,
                            text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def wait_for(what: str, condition: Callable[[], Any], timeout: float, interval: float = 2.0) -> Any:
    """Polls ``condition`` until it returns something truthy; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class Namespace:
    """One test's namespace, with the calls the tests make in it."""

    def __init__(self, name: str, api: kubernetes.client.ApiClient) -> None:
        self.name = name
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return kubectl("-n", self.name, *args, **kwargs)

    def apply(self, manifest: str) -> None:
        """``kubectl apply -f`` of a file's text, or of YAML text."""
        self.kubectl("apply", "-f", "-", stdin=manifest)

    def job(self, name: str) -> dict[str, Any]:
        job: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.name, PLURAL, name)
        return job

    def state(self, name: str) -> str:
        return str((self.job(name).get("status") or {}).get("state", ""))

    def wait_state(self, name: str, states: tuple[str, ...], timeout: float) -> dict[str, Any]:
        def reached() -> Optional[dict[str, Any]]:
            job = self.job(name)
            return job if (job.get("status") or {}).get("state") in states else None
        job: dict[str, Any] = wait_for(f"TrainingJob {name} to be {' or '.join(states)}", reached, timeout)
        return job

    def pods(self, selector: str = "") -> list[Any]:
        return list(self.core.list_namespaced_pod(self.name, label_selector=selector).items)

    def pod(self, name: str) -> Any:
        return self.core.read_namespaced_pod(name, self.name)

    def placement(self, job: str) -> dict[str, tuple[str, str]]:
        """The job's pods: name -> (node, uid), for pods that exist and are not terminating."""
        return {p.metadata.name: (p.spec.node_name or "", p.metadata.uid)
                for p in self.pods(f"tensorgrid.io/job-name={job}") if not p.metadata.deletion_timestamp}

    def running_elsewhere(self, job: str, lost: dict[str, tuple[str, str]], node: str) -> Optional[dict[str, str]]:
        """The replacements of the job's ``lost`` pods (``placement``'s entries), name -> node, once
        each runs on a node other than ``node``; None before."""
        now = {p.metadata.name: p for p in self.pods(f"tensorgrid.io/job-name={job}")}
        replaced = {}
        for name, (_, uid) in lost.items():
            pod = now.get(name)
            if pod is None or pod.metadata.uid == uid or pod.status.phase != "Running" or pod.spec.node_name == node:
                return None
            replaced[name] = str(pod.spec.node_name)
        return replaced

    def logs(self, pod: str) -> str:
        return self.kubectl("logs", pod, check=False).stdout

    def wait_log(self, pod: str, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of ``pattern`` in the pod's log, once there is one."""
        match: re.Match[str] = wait_for(f"{pod} to log {pattern!r}", lambda: re.search(pattern, self.logs(pod)),
                                        timeout, interval=1.0)
        return match

    def wait_running(self, pod: str, timeout: float = 180) -> None:
        wait_for(f"pod {pod} to run", lambda: self._phase(pod) == "Running", timeout, interval=1.0)

    def _phase(self, pod: str) -> str:
        try:
            return str(self.pod(pod).status.phase)
        except kubernetes.client.ApiException:
            return ""

    def diagnostics(self) -> str:
        """What a person debugging this test would look at."""
        parts = [kubectl("-n", OPERATOR_NAMESPACE, "logs", "--tail=200", "-l",
                         "app.kubernetes.io/name=tensorgrid-operator", "--prefix", check=False).stdout]
        parts.append(self.kubectl("describe", "trainingjobs", check=False).stdout)
        parts.append(self.kubectl("describe", "pods", check=False).stdout)
        for pod in self.pods():
            parts.append(f"--- logs of {pod.metadata.name}\n{self.logs(pod.metadata.name)[-6000:]}")
        return "\n".join(parts)


def example(name: str, **changes: Any) -> str:
    """An example manifest's text, as a user would apply it, with optional changes to the job.

    ``steps=N`` sets every program's ``--steps``; ``checkpoint_every=N`` its ``--checkpoint-every``;
    ``log_every=N`` its ``--log-every``; ``pace_ms=N`` its ``--pace-ms``.
    """
    path = REPO / "examples" / f"trainingjob-{name}.yaml"
    if not changes:
        return path.read_text()
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in documents:
        if doc["kind"] != "TrainingJob":
            continue
        for spec in doc["spec"]["replicaSpecs"].values():
            for container in spec["template"]["spec"]["containers"]:
                command = container.get("command") or []
                for flag, key in (("--steps", "steps"), ("--checkpoint-every", "checkpoint_every"),
                                  ("--log-every", "log_every"), ("--pace-ms", "pace_ms")):
                    if key in changes and command:  # no command: `tensorgrid server`, which trains nothing
                        if flag in command:
                            command[command.index(flag) + 1] = str(changes[key])
                        else:
                            command += [flag, str(changes[key])]
    return yaml.safe_dump_all(documents)


# A progress line of examples/distributed_digits.py: "worker:0 global step  1200  loss 0.1234 ...".
PROGRESS = r"global step\s+(\d+)\s+loss"


def global_steps(log: str) -> list[int]:
    """The global steps in a training program's progress lines, in order."""
    return [int(s) for s in re.findall(PROGRESS, log)]


def loss_values(log: str) -> list[float]:
    return [float(m) for m in re.findall(r"loss (\d+\.\d+)", log)]


def schedulable_nodes() -> list[str]:
    """The nodes a pod without tolerations may run on (no NoSchedule or NoExecute taint), by name."""
    nodes = yaml.safe_load(kubectl("get", "nodes", "-o", "yaml").stdout)["items"]
    return sorted(node["metadata"]["name"] for node in nodes
                  if not [taint for taint in node["spec"].get("taints") or []
                          if taint.get("effect") in ("NoSchedule", "NoExecute")])


def node_pod_routes() -> list[tuple[str, str]]:
    """Each node's podCIDR and its address on Docker's network, through which this machine reaches
    that node's pods."""
    out = kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}{.spec.podCIDR} "
                  "{.status.addresses[?(@.type=='InternalIP')].address}{\"\\n\"}{end}").stdout
    routes = [(fields[0], fields[1]) for fields in map(str.split, out.splitlines()) if len(fields) == 2]
    assert routes, f"no node with a podCIDR and an InternalIP: {out!r}"
    return routes


@contextlib.contextmanager
def pod_network_routed() -> Iterator[None]:
    """This machine reaches pod IPs (POD_SUBNET) through their kind nodes while the block runs: a
    route per node, to its podCIDR through its address.

    Traffic from here reaches the pods from this machine's address on kind's network, which
    e2e/cluster.sh gives the chart as where Prometheus runs.
    """
    routes = node_pod_routes()
    for cidr, address in routes:
        subprocess.run(["ip", "route", "replace", cidr, "via", address], check=True)
    try:
        yield
    finally:
        for cidr, _ in routes:
            subprocess.run(["ip", "route", "del", cidr], check=False)
