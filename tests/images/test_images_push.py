"""`make images-push REGISTRY=...` pushes the images under the names `image.registry` makes.

No registry is reachable here, so nothing is pushed: `make -n` shows what the target runs, and
hack/push-images.sh's ``--dry-run`` prints its docker commands (it needs no Docker engine then),
for both ways, buildx's multi-arch push and `make images` with docker tag and push.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def push_dry_run(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("BUILDX", "PLATFORMS", "BUILD_CUDA")}
    return subprocess.run([str(ROOT / "hack" / "push-images.sh"), "--dry-run"], capture_output=True, text=True,
                          env={**environment, "TENSORGRID_OFFLINE_BASES": "0", **env}, timeout=60)


def test_make_images_push_runs_the_push_script_with_the_registry() -> None:
    planned = subprocess.run(["make", "-n", "images-push", "REGISTRY=r.example"], cwd=ROOT, capture_output=True,
                             text=True, check=True, timeout=60).stdout
    assert "REGISTRY=r.example" in planned and "hack/push-images.sh" in planned
    refused = subprocess.run(["make", "images-push"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "make images-push needs REGISTRY=<registry>" in refused.stderr


def test_buildx_pushes_multi_arch_images_under_the_charts_names() -> None:
    result = push_dry_run(REGISTRY="r.example/ml/", BUILDX="1")
    assert result.returncode == 0, result.stderr
    builds = result.stdout.splitlines()
    assert len(builds) == 3 and all(line.startswith("docker buildx build --platform ") for line in builds)
    assert all(line.endswith(f"--push {ROOT}") for line in builds)
    assert f"-t r.example/ml/tensorgrid:{VERSION} " in builds[0] and "linux/amd64\\,linux/arm64" in builds[0]
    assert f"-t r.example/ml/tensorgrid-operator:{VERSION} " in builds[1]
    assert f"-t r.example/ml/tensorgrid:{VERSION}-cuda " in builds[2] and "VARIANT=cuda" in builds[2]


def test_without_buildx_it_builds_locally_then_tags_and_pushes() -> None:
    result = push_dry_run(REGISTRY="registry.example.com:5000/ml", BUILDX="0", BUILD_CUDA="0")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("hack/build-images.sh runtime operator")
    assert lines[1:] == [
        f"docker tag tensorgrid:latest registry.example.com:5000/ml/tensorgrid:{VERSION}",
        f"docker push registry.example.com:5000/ml/tensorgrid:{VERSION}",
        f"docker tag tensorgrid-operator:latest registry.example.com:5000/ml/tensorgrid-operator:{VERSION}",
        f"docker push registry.example.com:5000/ml/tensorgrid-operator:{VERSION}"]


@pytest.mark.parametrize(("env", "message"), [
    ({"REGISTRY": ""}, "REGISTRY is not set"),
    ({"REGISTRY": "bad registry"}, "REGISTRY 'bad registry' is not a registry host"),
    ({"REGISTRY": "r.example", "BUILDX": "maybe"}, "BUILDX is 'maybe': auto"),
    ({"REGISTRY": "r.example", "BUILDX": "1", "TENSORGRID_OFFLINE_BASES": "1"}, "with OFFLINE_BASES=1 use BUILDX=0"),
])
def test_a_bad_setting_is_named(env: dict[str, str], message: str) -> None:
    result = push_dry_run(**env)
    assert result.returncode == 2 and message in result.stderr, result.stderr
