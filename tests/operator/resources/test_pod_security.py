"""Training pods meet Pod Security's ``restricted`` level unless their template says otherwise, field by field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import pod_security

RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def restricted_violations(pod_spec: dict[str, Any]) -> list[str]:
    """What Pod Security's restricted checks (runAsNonRoot, seccomp, allowPrivilegeEscalation,
    capabilities) find wrong with ``pod_spec``; the real admission runs in
    tests/operator/controlplane/test_restricted_namespace.py."""
    pod = pod_spec.get("securityContext") or {}
    found = []
    for container in (pod_spec.get("initContainers") or []) + pod_spec["containers"]:
        context = container.get("securityContext") or {}
        name = container["name"]
        if context.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True:
            found.append(f"{name}: runAsNonRoot")
        if (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault",
                                                                                                  "Localhost"):
            found.append(f"{name}: seccompProfile")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []) or set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities")
    return found


def test_a_template_without_security_settings_gets_the_restricted_ones() -> None:
    job = make_job(ps=1, workers=1)
    template = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    template["initContainers"] = [{"name": "fetch-data", "image": "busybox"}]
    template["containers"].append({"name": "log-shipper", "image": "fluent-bit"})
    before = copy.deepcopy(template)
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(spec_lib.ReplicaType.WORKER, 0))
    assert pod["spec"]["securityContext"] == RESTRICTED_POD
    for container in pod["spec"]["initContainers"] + pod["spec"]["containers"]:
        assert container["securityContext"] == RESTRICTED_CONTAINER, container["name"]
    assert restricted_violations(pod["spec"]) == []
    assert template == before  # the job's template is left as it was
    assert any(e["name"] == "TF_CONFIG" for e in pod["spec"]["containers"][0]["env"])


@pytest.mark.parametrize("template, pod_context, container_context", [
    # The template's own values win, field by field; what it leaves out is filled.
    ({"securityContext": {"runAsNonRoot": False, "fsGroup": 2000}},
     {"runAsNonRoot": False, "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}, RESTRICTED_CONTAINER),
    ({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "tf.json"}}},
     {"seccompProfile": {"type": "Localhost", "localhostProfile": "tf.json"}, "runAsNonRoot": True},
     RESTRICTED_CONTAINER),
    ({"containerSecurityContext": {"allowPrivilegeEscalation": True, "capabilities": {"add": ["NET_ADMIN"]},
                                   "readOnlyRootFilesystem": True}},
     RESTRICTED_POD,
     {"allowPrivilegeEscalation": True, "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
      "readOnlyRootFilesystem": True}),
    ({"containerSecurityContext": {"capabilities": {"drop": ["NET_RAW"]}}},
     RESTRICTED_POD, {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}}),
    # What the API server refuses beside allowPrivilegeEscalation: false is not combined with it.
    ({"containerSecurityContext": {"privileged": True}}, RESTRICTED_POD, {"privileged": True}),
    ({"containerSecurityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
     RESTRICTED_POD, {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}),
    # A container that runs as root on purpose could not start under runAsNonRoot: true.
    ({"containerSecurityContext": {"runAsUser": 0}},
     {"seccompProfile": {"type": "RuntimeDefault"}}, {"runAsUser": 0, **RESTRICTED_CONTAINER}),
    ({"securityContext": {"runAsUser": 0}},
     {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}, RESTRICTED_CONTAINER),
])
def test_the_templates_own_settings_win(template: dict[str, Any], pod_context: dict[str, Any],
                                        container_context: dict[str, Any]) -> None:
    container: dict[str, Any] = {"name": "tensorgrid", "image": "tg"}
    if "containerSecurityContext" in template:
        container["securityContext"] = template.pop("containerSecurityContext")
    filled = pod_security.with_restricted_defaults({**template, "containers": [container]})
    assert filled["securityContext"] == pod_context
    assert filled["containers"][0]["securityContext"] == container_context


def test_a_windows_pod_is_left_as_it_is() -> None:
    spec = {"os": {"name": "windows"}, "containers": [{"name": "tensorgrid", "image": "tg"}]}
    assert pod_security.with_restricted_defaults(spec) == spec
