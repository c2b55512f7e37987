"""values.schema.json covers every value of values.yaml, and helm refuses a bad value with its message.

Helm checks the merged values against the chart's JSON schema (draft-07) on lint, template,
install and upgrade, so a typo or a string where a number belongs stops before anything is
applied, with the path of the bad value and what it should be.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Iterator

import pytest
import yaml

from chart_support import CHART, RELEASE_NAMESPACE, VALUE_SETS, run_helm, template, values_file

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def typed_values(values: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Each value of values.yaml with its schema node; a Kubernetes object (resources, a security
    context) is one value, typed as an object, as is a map of labels."""
    assert schema.get("additionalProperties") is False, f"{prefix or 'the top level'} admits unknown keys"
    for key, value in values.items():
        path = f"{prefix}{key}"
        assert key in schema["properties"], f"{path} is in values.yaml, not in values.schema.json"
        node = schema["properties"][key]
        if isinstance(value, dict) and "properties" in node:
            yield from typed_values(value, node, f"{path}.")
        else:
            yield path, node


def test_the_schema_is_draft_07_and_names_every_value_with_a_type() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    typed = dict(typed_values(values, SCHEMA))
    assert {"image.registry", "image.repository", "image.tag", "uninstall.timeoutSeconds"} <= set(typed)
    for path, node in typed.items():
        assert "type" in node or "oneOf" in node, f"{path}: {node}"
    assert typed["image.pullPolicy"]["enum"] == ["Always", "IfNotPresent", "Never"]
    assert typed["resources"]["type"] == "object"


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_value_set_passes_the_schema(name: str, tmp_path: pathlib.Path) -> None:
    result = run_helm("lint", "--strict", str(CHART), "--namespace", RELEASE_NAMESPACE,
                      "-f", str(values_file(VALUE_SETS[name], tmp_path)))
    assert "0 chart(s) failed" in result.stdout, result.stdout


@pytest.mark.parametrize(("values", "message"), [
    ({"operator": {"resyncSeconds": "often"}}, "at '/operator/resyncSeconds': got string, want integer"),
    ({"replicas": 0}, "at '/replicas': minimum: got 0, want 1"),
    ({"metrics": {"port": 70000}}, "at '/metrics/port': maximum: got 70,000, want 65,535"),
    ({"image": {"pullPolicy": "Sometimes"}},
     "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"),
    ({"imagee": {"registry": "ghcr.io/acme"}}, "additional properties 'imagee' not allowed"),
    ({"watchNamespaces": "team-a"}, "at '/watchNamespaces': got string, want array"),
    ({"trainingPods": {"nodeLostTolerationSeconds": "never"}}, "at '/trainingPods/nodeLostTolerationSeconds'"),
])
def test_a_bad_value_fails_lint_and_template_with_the_schemas_message(
        values: dict[str, Any], message: str, tmp_path: pathlib.Path) -> None:
    rendered = template(values, check=False)
    assert rendered.returncode != 0 and message in rendered.stderr, rendered.stderr
    linted = run_helm("lint", str(CHART), "-f", str(values_file(values, tmp_path)), check=False)
    assert linted.returncode != 0 and message in linted.stdout + linted.stderr, linted.stdout


def test_node_lost_toleration_takes_seconds_or_off() -> None:
    for setting in (0, 45, "off"):
        template({"trainingPods": {"nodeLostTolerationSeconds": setting}})
