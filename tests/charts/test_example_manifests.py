"""The TrainingJob examples are valid jobs that run the example programs in the runtime image.

Each examples/trainingjob-*.yaml validates against the CRD on the real API server
(schema and CEL rules), names programs that exist in examples/ with flags those
programs accept, and becomes the pods the example describes (the operator's pure
reconcile: TF_CONFIG, GPU limits, tolerations, the sync switch).
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import pathlib
from typing import Any

import pytest
import yaml

from chart_support import ROOT
from kube_controlplane import ControlPlane

EXAMPLES = ROOT / "examples"
MANIFESTS = sorted(EXAMPLES.glob("trainingjob-*.yaml"))
# The runtime images `make images` builds, and the CUDA tag the examples document.
IMAGES = {"tensorgrid:0.1.0", "tensorgrid:0.1.0-cuda"}


def _documents(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _load(path: pathlib.Path) -> dict[str, Any]:
    """The TrainingJob of an example (a file may also hold the PVC its checkpoints live on)."""
    jobs = [doc for doc in _documents(path) if doc["kind"] == "TrainingJob"]
    assert len(jobs) == 1, f"{path.name}: {len(jobs)} TrainingJobs"
    return jobs[0]


def _containers(job: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(rtype, c) for rtype, spec in job["spec"]["replicaSpecs"].items()
            for c in spec["template"]["spec"]["containers"]]


def _pods(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pods the operator creates for this job on its first reconcile."""
    from tensorgrid_operator.reconcile import reconcile

    job = json.loads(json.dumps(job))
    job["metadata"].update({"namespace": "team", "uid": "uid-1", "generation": 1, "resourceVersion": "1",
                            "creationTimestamp": "2030-01-01T00:00:00Z"})
    now = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
    plan = reconcile.reconcile(job, [], [], now)
    return {pod.name: pod.manifest() for pod in plan.create_pods}


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


def test_the_examples_cover_async_sync_chief_gpu_and_a_tf1_program() -> None:
    assert {p.name for p in MANIFESTS} >= {"trainingjob-async.yaml", "trainingjob-sync.yaml",
                                           "trainingjob-chief.yaml", "trainingjob-gpu.yaml",
                                           "trainingjob-supervisor.yaml"}


@pytest.mark.controlplane
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_validates_on_the_api_server(controlplane: ControlPlane, path: pathlib.Path) -> None:
    result = controlplane.kubectl("apply", "--dry-run=server", "--validate=strict", "-n", "default",
                                  "-f", str(path), check=False)
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout


_PROGRAMS: dict[pathlib.Path, Any] = {}
"""The example programs loaded so far: a TF1 program defines its tf.app.flags once per process."""


def _program(program: pathlib.Path) -> Any:
    if program not in _PROGRAMS:
        spec = importlib.util.spec_from_file_location(f"example_{program.stem}", program)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _PROGRAMS[program] = module
    return _PROGRAMS[program]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_runs_existing_programs_with_accepted_flags(path: pathlib.Path) -> None:
    for rtype, container in _containers(_load(path)):
        assert container["image"] in IMAGES, f"{path.name} {rtype}: image {container['image']}"
        command = container.get("command")
        if command is None:
            continue  # the image's entrypoint: `tensorgrid server`
        assert command[0] == "python" and command[1].startswith("/app/examples/"), command
        program = EXAMPLES / command[1].removeprefix("/app/examples/")
        assert program.is_file(), f"{path.name} {rtype} runs {command[1]}, which examples/ does not have"
        module = _program(program)
        if hasattr(module, "parse_args"):
            module.parse_args(command[2:])  # argparse exits on a flag the program does not know
        else:  # a TF1 program's tf.app.flags: an unknown flag is an UnrecognizedFlagError
            module.FLAGS(["python", *command[2:]])


@pytest.mark.parametrize("name", ["async", "sync", "chief"])
def test_checkpoints_live_on_a_persistent_volume_claim_of_the_same_file(name: str) -> None:
    # A restarted chief resumes from its checkpoint only if the checkpoint outlives the pod.
    path = EXAMPLES / f"trainingjob-{name}.yaml"
    claims = {doc["metadata"]["name"] for doc in _documents(path) if doc["kind"] == "PersistentVolumeClaim"}
    job = _load(path)
    mounted = {}
    for rtype, spec in job["spec"]["replicaSpecs"].items():
        volumes = {v["name"]: v for v in spec["template"]["spec"].get("volumes", [])}
        for container in spec["template"]["spec"]["containers"]:
            command = container.get("command") or []
            if "--checkpoint-dir" in command:
                directory = command[command.index("--checkpoint-dir") + 1]
                mount = next(m for m in container["volumeMounts"] if m["mountPath"] == directory)
                mounted[rtype] = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    assert mounted and set(mounted.values()) <= claims, (mounted, claims)


def test_sync_example_trains_synchronously() -> None:
    pods = _pods(_load(EXAMPLES / "trainingjob-sync.yaml"))
    assert set(pods) == {"digits-sync-ps-0", "digits-sync-worker-0", "digits-sync-worker-1"}
    assert _env(pods["digits-sync-worker-1"])["TENSORGRID_SYNC"] == "1"


def test_chief_example_has_a_chief_job_in_tf_config() -> None:
    pods = _pods(_load(EXAMPLES / "trainingjob-chief.yaml"))
    assert set(pods) == {"digits-chief-chief-0", "digits-chief-ps-0", "digits-chief-ps-1",
                         "digits-chief-worker-0", "digits-chief-worker-1"}
    tf_config = json.loads(_env(pods["digits-chief-worker-1"])["TF_CONFIG"])
    assert tf_config["cluster"]["chief"] == ["digits-chief-chief-0.team.svc:2222"]
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert pods["digits-chief-chief-0"]["metadata"]["labels"]["tensorgrid.io/job-role"] == "chief"


def test_gpu_example_asks_for_gpus_and_tolerates_gpu_nodes() -> None:
    pods = _pods(_load(EXAMPLES / "trainingjob-gpu.yaml"))
    worker = pods["digits-gpu-worker-0"]["spec"]
    assert worker["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert worker["containers"][0]["image"] == "tensorgrid:0.1.0-cuda"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in worker["tolerations"]
    ps = pods["digits-gpu-ps-0"]["spec"]
    assert "limits" not in ps["containers"][0].get("resources", {}) and "tolerations" not in ps
