"""The operator image comes from one ``image.registry`` setting, and NOTES.txt warns without one.

The Deployment and the uninstall hook pull ``<registry>/<repository>:<tag>``; with no registry
they pull the bare local name (what ``kind load`` provides), and the release notes say that
other clusters cannot pull it. helm renders NOTES.txt only against a cluster, so the test
renders the chart's own NOTES.txt through ``tpl`` in a copy of the chart.
"""

from __future__ import annotations

import pathlib
import shutil
from typing import Any

import pytest
import yaml

from chart_support import CHART, RELEASE_NAMESPACE, by_kind, render, run_helm


def pulled_images(values: dict[str, Any]) -> set[str]:
    manifests = render(values, hooks=True)
    return {container["image"]
            for kind in ("Deployment", "Job")
            for manifest in by_kind(manifests, kind)
            for container in manifest["spec"]["template"]["spec"]["containers"]}


@pytest.mark.parametrize(("image", "expected"), [
    ({}, "tensorgrid-operator:0.1.0"),
    ({"registry": "ghcr.io/acme"}, "ghcr.io/acme/tensorgrid-operator:0.1.0"),
    ({"registry": "registry.example.com:5000/ml/"}, "registry.example.com:5000/ml/tensorgrid-operator:0.1.0"),
    ({"registry": "ghcr.io/acme", "repository": "tg-operator", "tag": "dev"}, "ghcr.io/acme/tg-operator:dev"),
])
def test_the_operator_and_its_uninstall_hook_pull_from_the_registry(image: dict[str, str], expected: str) -> None:
    assert pulled_images({"image": image}) == {expected}


def release_notes(values: dict[str, Any], tmp_path: pathlib.Path) -> str:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, symlinks=False)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.txt")
    (chart / "templates" / "rendered-notes.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n'
        'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n')
    values_path = tmp_path / "values.yaml"
    values_path.write_text(yaml.safe_dump(values))
    rendered = run_helm("template", "tg", str(chart), "--namespace", RELEASE_NAMESPACE, "-f", str(values_path),
                        "--show-only", "templates/rendered-notes.yaml").stdout
    notes: str = yaml.safe_load(rendered)["data"]["notes"]
    return notes


def test_notes_warn_when_no_registry_is_set(tmp_path: pathlib.Path) -> None:
    notes = release_notes({}, tmp_path)
    assert "WARNING: image.registry is not set" in notes
    assert "make images-push REGISTRY=<registry>" in notes
    assert "kubectl apply -f examples/trainingjob-async.yaml" in notes


def test_notes_show_the_examples_with_the_registry(tmp_path: pathlib.Path) -> None:
    notes = release_notes({"image": {"registry": "registry.example.com/ml"}}, tmp_path)
    assert "WARNING" not in notes
    assert ('sed "s#image: tensorgrid:#image: registry.example.com/ml/tensorgrid:#" '
            "examples/trainingjob-async.yaml | kubectl apply -f -") in notes
