"""Static checks of docker/*.Dockerfile, the CUDA variant included, which cannot be built here.

`make images` builds and `make images-smoke` runs the CPU runtime image and the
operator image for real, plus the CUDA variant's every step on a stand-in base
without Python (NVIDIA's base cannot be pulled). What no build here can show is
checked from the text: stages and build arguments are complete (every argument used
is declared where it is used, as Docker requires), the CUDA variant installs the
[gpu] extra, final stages run as a numeric non-root user with labels and a health
check, and hold no build tools.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILES = {"runtime": ROOT / "docker" / "runtime.Dockerfile", "operator": ROOT / "docker" / "operator.Dockerfile"}
OCI_LABELS = {"title", "description", "licenses", "version", "revision", "created"}
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|clang|make|build-essential|python3-dev|libc6-dev|cmake|git)\b")


def instructions(path: pathlib.Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    current = ""
    for line in path.read_text().splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        keyword, _, rest = current.strip().partition(" ")
        result.append((keyword.upper(), rest.strip()))
        current = ""
    assert not current, f"{path.name} ends inside a continued instruction"
    return result


def stages(path: pathlib.Path) -> tuple[list[tuple[str, str]], dict[str, list[tuple[str, str]]]]:
    """(instructions before the first FROM, {stage name: its instructions including FROM})."""
    preamble: list[tuple[str, str]] = []
    named: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = preamble
    for keyword, rest in instructions(path):
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            assert match and match.group(2), f"{path.name}: every stage is named: FROM {rest}"
            current = named.setdefault(match.group(2), [])
        current.append((keyword, rest))
    return preamble, named


def used_args(text: str) -> set[str]:
    return set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", text))


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_base_image_is_a_build_argument_with_a_standard_default(name: str) -> None:
    preamble, named = stages(DOCKERFILES[name])
    assert ("ARG", "BASE_IMAGE=python:3.11-slim") in preamble
    first_stage = next(iter(named.values()))
    assert first_stage[0] == ("FROM", "${BASE_IMAGE} AS base")


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_every_argument_is_declared_where_it_is_used(name: str) -> None:
    """Docker expands only arguments declared in the stage (or before FROM, for FROM lines)."""
    preamble, named = stages(DOCKERFILES[name])
    global_args = {rest.split("=")[0] for keyword, rest in preamble if keyword == "ARG"}
    for stage, body in named.items():
        declared: set[str] = set()
        env: set[str] = set()
        for keyword, rest in body:
            if keyword == "FROM":
                assert used_args(rest) <= global_args, f"{stage}: FROM uses undeclared {used_args(rest) - global_args}"
            elif keyword == "ARG":
                declared.add(rest.split("=")[0])
            elif keyword == "ENV":
                env |= set(re.findall(r"([A-Z_][A-Z0-9_]*)=", rest))
            elif keyword in ("LABEL", "COPY", "USER", "WORKDIR", "EXPOSE"):
                # Expanded by Docker at build time: must be build arguments or ENV of this stage.
                undeclared = used_args(rest) - declared - env
                assert not undeclared, f"{name}/{stage}: {keyword} uses undeclared {undeclared}"


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_final_stage_is_small_non_root_labelled_and_checked(name: str) -> None:
    _, named = stages(DOCKERFILES[name])
    final_name, final = list(named.items())[-1]
    assert final[0][1] == f"base AS {final_name}", "the final stage starts from the base, not the builder"
    runs = " ".join(rest for keyword, rest in final if keyword == "RUN")
    assert not BUILD_TOOLS.search(runs), f"build tools in the final stage: {runs}"
    assert "pip install" not in runs, "the final stage copies the builder's /opt/venv instead of installing"
    assert ("COPY", "--from=builder /opt/venv /opt/venv") in final
    (user,) = [rest for keyword, rest in final if keyword == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit(), f"USER {user}: numeric and non-root"
    labels = " ".join(rest for keyword, rest in final if keyword == "LABEL")
    assert {m for m in re.findall(r"org\.opencontainers\.image\.(\w+)=", labels)} >= OCI_LABELS
    (healthcheck,) = [rest for keyword, rest in final if keyword == "HEALTHCHECK"]
    assert "CMD [" in healthcheck, "HEALTHCHECK in exec form (the image has no shell tools to rely on)"
    (entrypoint,) = [rest for keyword, rest in final if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint), "ENTRYPOINT in exec form, so signals reach the program"


def test_cuda_variant_is_complete() -> None:
    """VARIANT=cuda adds the [gpu] extra (cupy) and the Dockerfile documents the NVIDIA base to build it on."""
    text = DOCKERFILES["runtime"].read_text()
    _, named = stages(DOCKERFILES["runtime"])
    builder_runs = " ".join(rest for keyword, rest in named["builder"] if keyword == "RUN")
    match = re.search(r'case "\$VARIANT" in (.*?) esac', builder_runs)
    assert match, "the builder selects the extras with case \"$VARIANT\""
    branches = dict(re.findall(r"(\w+)\) (extras=[^;]*);;", match.group(1)))
    assert set(branches) == {"cpu", "cuda", "cuda13"}, branches
    assert branches["cuda"].strip().endswith("gpu\"") and branches["cuda13"].strip().endswith("gpu-cuda13\"")
    assert "gpu" not in branches["cpu"]
    assert re.search(r"exit 2", match.group(1)), "an unknown VARIANT fails the build"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu"] == extras["gpu-cuda12"] and [r.split(">")[0] for r in extras["gpu"]] == ["cupy-cuda12x"]
    assert [r.split(">")[0] for r in extras["gpu-cuda13"]] == ["cupy-cuda13x"]
    # The documented command builds on NVIDIA's CUDA 12 runtime image, which cupy-cuda12x needs.
    assert re.search(r"--build-arg VARIANT=cuda --build-arg BASE_IMAGE=nvidia/cuda:12\.[\d.]+-runtime-ubuntu", text)
    assert re.search(r"--build-arg VARIANT=cuda13 --build-arg BASE_IMAGE=nvidia/cuda:13\.[\d.]+-runtime-ubuntu", text)
    # NVIDIA's images have no Python: the base stage installs it when missing.
    base_runs = " ".join(rest for keyword, rest in named["base"] if keyword == "RUN")
    assert "command -v python3" in base_runs and "apt-get install" in base_runs and "python3" in base_runs
    # cupy writes its kernel cache when imported: somewhere writable under a read-only root.
    assert "CUPY_CACHE_DIR=/tmp/" in text


def _dockerignore_allows(relative: str) -> bool:
    allowed = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(relative, pattern) or relative.startswith(pattern + "/") or pattern == "*":
            allowed = negate
    return allowed


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_copied_sources_exist_and_reach_the_build_context(name: str) -> None:
    for keyword, rest in instructions(DOCKERFILES[name]):
        if keyword != "COPY" or rest.startswith("--from="):
            continue
        *sources, _ = rest.split()
        for source in sources:
            assert (ROOT / source).exists(), f"{name}: COPY {source}: no such file"
            assert _dockerignore_allows(source.rstrip("/")), f"{name}: COPY {source} is excluded by .dockerignore"
    assert not _dockerignore_allows(".venv") and not _dockerignore_allows(".git")


def _load_script(name: str) -> Any:
    path = ROOT / "docker" / name
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_operator_image_installs_what_the_operator_imports() -> None:
    """The operator image gets the [operator] extra and the core dependencies the operator imports, nothing else."""
    requirements = _load_script("operator-requirements.py")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = {requirements.requirement_name(r) for r in requirements.operator_requirements(pyproject)}
    distributions = {"kopf": "kopf", "kubernetes": "kubernetes", "prometheus_client": "prometheus-client",
                     "cryptography": "cryptography", "yaml": "pyyaml", "urllib3": "urllib3"}
    imported = set()
    for path in (ROOT / "operator" / "tensorgrid_operator").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                       else [])
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("tensorgrid_operator", "__future__"):
                    imported.add(top)
    assert imported <= set(distributions), f"the operator imports {imported - set(distributions)}: add it"
    assert {distributions[m] for m in imported} == names


@pytest.mark.parametrize("tf_config, port", [
    (None, None),
    ({"cluster": {"ps": ["tg-ps-0:2222"], "worker": ["tg-worker-0:2223"]}, "task": {"type": "worker", "index": 0}},
     2223),
    ({"cluster": {"worker": ["w:2222"]}, "task": {"type": "evaluator", "index": 0}}, None),
])
def test_runtime_healthcheck_reads_its_own_port(tf_config: Any, port: Any) -> None:
    healthcheck = _load_script("runtime-healthcheck.py")
    if tf_config is not None:
        assert healthcheck.own_port(json.dumps(tf_config)) == port


def test_runtime_healthcheck_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    healthcheck = _load_script("runtime-healthcheck.py")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert healthcheck.main() == 0  # nothing to check
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        config = {"cluster": {"ps": [f"tg-ps-0:{port}"]}, "task": {"type": "ps", "index": 0}}
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        assert healthcheck.main() == 0
    assert healthcheck.main() == 1  # nothing listens any more
    monkeypatch.setenv("TF_CONFIG", "{not json")
    assert healthcheck.main() == 1


def _images_env(offline: str | None) -> subprocess.CompletedProcess[str]:
    """hack/images.env as the image scripts source it, with TENSORGRID_OFFLINE_BASES set to ``offline``
    (None: unset) and none of its names overridden from this environment."""
    names = ("PYTHON_BASE_IMAGE", "CUDA_BASE_IMAGE", "CUDA_IMAGE", "OS_BASE_IMAGE", "LOCAL_PYTHON_BASE_IMAGE")
    env = {k: v for k, v in os.environ.items()
           if k not in names and k not in ("TENSORGRID_OFFLINE_BASES", "IMAGE_TAG")}
    if offline is not None:
        env["TENSORGRID_OFFLINE_BASES"] = offline
    script = 'source hack/images.env && for name in "$@"; do echo "$name=${!name}"; done'
    return subprocess.run(["bash", "-c", script, "images.env", *names], cwd=ROOT, env=env, capture_output=True,
                          text=True)


def _bases(offline: str | None) -> dict[str, str]:
    result = _images_env(offline)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


@pytest.mark.parametrize("offline", [None, "0"])
def test_images_build_from_the_standard_bases_by_default(offline: str | None) -> None:
    """A user with a registry gets the usual images: the Dockerfiles' python:3.11-slim, and the CUDA
    variant on the NVIDIA base its documented command names."""
    bases = _bases(offline)
    preamble, _ = stages(DOCKERFILES["runtime"])
    assert ("ARG", f"BASE_IMAGE={bases['PYTHON_BASE_IMAGE']}") in preamble
    documented = re.search(r"--build-arg VARIANT=cuda --build-arg BASE_IMAGE=(\S+)", DOCKERFILES["runtime"].read_text())
    assert documented and bases["CUDA_BASE_IMAGE"] == documented.group(1)
    assert bases["CUDA_IMAGE"] == "tensorgrid:latest-cuda"


def test_offline_bases_are_the_local_debootstrap_images() -> None:
    bases = _bases("1")
    assert bases["PYTHON_BASE_IMAGE"] == bases["LOCAL_PYTHON_BASE_IMAGE"]
    assert bases["PYTHON_BASE_IMAGE"].startswith("tensorgrid-base/python:3.11-")
    # NVIDIA's base cannot be pulled: the CUDA variant's every other step runs on bare Debian, under a
    # name that does not pass for the real CUDA image.
    assert bases["CUDA_BASE_IMAGE"] == bases["OS_BASE_IMAGE"] and bases["OS_BASE_IMAGE"].startswith("tensorgrid-base/")
    assert bases["CUDA_IMAGE"] == "tensorgrid:cuda-path-check"


def test_an_unknown_offline_switch_is_an_error_naming_it() -> None:
    result = _images_env("yes")
    assert result.returncode == 2
    assert "TENSORGRID_OFFLINE_BASES" in result.stderr and "'yes'" in result.stderr
    assert "1 builds FROM local Debian bases" in result.stderr


def test_shell_scripts_pass_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        message = "shellcheck is not installed (`make tools` installs it: apt-get install shellcheck)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    scripts = [f"hack/{name}" for name in ("docker-engine.sh", "base-images.sh", "build-images.sh",
                                           "smoke-images.sh", "tools.sh", "runc-capfilter")]
    # The kind cluster of the end-to-end suite and its node image.
    scripts += ["e2e/cluster.sh", "e2e/node-image/build.sh", "e2e/node-image/images/kube-proxy-wrapper",
                "e2e/node-image/images/kube-router-wrapper",
                "e2e/node-image/rootfs/usr/local/bin/entrypoint",
                "e2e/node-image/rootfs/usr/local/bin/select-iptables-backend",
                "e2e/node-image/rootfs/usr/local/bin/tensorgrid-local-volumes"]
    result = subprocess.run([shellcheck, "-x", *scripts], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
