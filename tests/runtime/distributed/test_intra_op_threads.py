"""How many BLAS threads a task takes when its config sets none: the environment's
TENSORGRID_INTRA_OP_THREADS (which the operator sets from the pod's CPU), else the cores it may
use (affinity, and a cgroup CPU limit) shared among the cluster's tasks on this machine."""

from __future__ import annotations

import pathlib

import pytest

from tensorgrid.distributed import cluster as cluster_lib

REMOTE = cluster_lib.ClusterSpec({"ps": ["ps-0.svc:2222"], "worker": ["worker-0.svc:2222"]})


def test_the_environment_sets_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORGRID_INTRA_OP_THREADS", "3")
    assert cluster_lib.default_intra_op_threads(REMOTE, "worker-0.svc:2222") == 3


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_thread_count_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TENSORGRID_INTRA_OP_THREADS", value)
    with pytest.raises(ValueError, match=rf"TENSORGRID_INTRA_OP_THREADS='{value}'.*whole number of threads >= 1"):
        cluster_lib.default_intra_op_threads(REMOTE, "worker-0.svc:2222")


@pytest.mark.parametrize("cpu_max, cores", [
    ("max 100000", None), ("150000 100000", 2), ("50000 100000", 1), ("400000 100000", 4)])
def test_a_cgroup_v2_cpu_limit_in_whole_cores(tmp_path: pathlib.Path, cpu_max: str, cores: int) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    assert cluster_lib.cgroup_cpu_limit(str(tmp_path)) == cores


@pytest.mark.parametrize("quota, cores", [("-1", None), ("250000", 3)])
def test_a_cgroup_v1_cpu_limit_in_whole_cores(tmp_path: pathlib.Path, quota: str, cores: int) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(quota)
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000")
    assert cluster_lib.cgroup_cpu_limit(str(tmp_path)) == cores


def test_no_cgroup_files_is_no_limit(tmp_path: pathlib.Path) -> None:
    assert cluster_lib.cgroup_cpu_limit(str(tmp_path)) is None


def test_the_cgroup_limit_caps_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TENSORGRID_INTRA_OP_THREADS", raising=False)
    monkeypatch.setattr(cluster_lib, "cgroup_cpu_limit", lambda: 1)
    assert cluster_lib.default_intra_op_threads(REMOTE, "worker-0.svc:2222") == 1
