"""The task's and the operator's /metrics, which the chart's dashboard and alerts read, follow Prometheus' conventions (docs/metrics.md): counters
end in ``_total`` and export no ``_created`` series, both processes export ``process_*`` and
``tensorgrid_build_info``, and every family the pages export is in docs/metrics.md's table."""

from __future__ import annotations

import pathlib
import platform
import re

import prometheus_client
import pytest

from tensorgrid import monitoring
from tensorgrid import version
from tensorgrid_operator import metrics as operator_metrics

ROOT = pathlib.Path(__file__).resolve().parents[2]
REGISTRIES = {"runtime": monitoring.REGISTRY, "operator": operator_metrics.REGISTRY}


def _documented_families() -> set[str]:
    return set(re.findall(r"^\| `([a-z_]+)` \|", (ROOT / "docs" / "metrics.md").read_text(), re.MULTILINE))


@pytest.mark.parametrize("component", sorted(REGISTRIES))
def test_counters_end_in_total_and_no_created_series(component: str) -> None:
    registry = REGISTRIES[component]
    text = prometheus_client.generate_latest(registry).decode()
    assert not re.search(r"^\w+_created[{ ]", text, re.MULTILINE), text
    counters = [f for f in registry.collect() if f.type == "counter"]
    assert counters
    for family in counters:
        assert all(s.name == family.name + "_total" for s in family.samples), family


@pytest.mark.parametrize("component", sorted(REGISTRIES))
def test_process_metrics_and_build_info(component: str) -> None:
    registry = REGISTRIES[component]
    assert (registry.get_sample_value("process_resident_memory_bytes") or 0) > 0
    assert registry.get_sample_value("tensorgrid_build_info", {
        "component": component, "version": version.TENSORGRID_VERSION,
        "python_version": platform.python_version()}) == 1


@pytest.mark.parametrize("component", sorted(REGISTRIES))
def test_every_family_is_documented(component: str) -> None:
    exported = {f.name for f in REGISTRIES[component].collect()
                if f.name.startswith("tensorgrid_")}
    exported = {name + "_total" if name in _counter_names(component) else name for name in exported}
    assert exported <= _documented_families(), sorted(exported - _documented_families())


def _counter_names(component: str) -> set[str]:
    return {f.name for f in REGISTRIES[component].collect() if f.type == "counter"}
