"""The securityContext a training pod gets when its template says nothing: Pod Security's ``restricted``.

Why it exists: a namespace labelled ``pod-security.kubernetes.io/enforce: restricted`` refuses a pod
without ``runAsNonRoot``, a seccomp profile, ``allowPrivilegeEscalation: false`` and all capabilities
dropped, and a training program needs none of what they forbid. So the operator fills each of these
fields the template leaves out, field by field: whatever the template sets wins, so a job that needs
root (an image without a numeric non-root ``USER``) says ``runAsNonRoot: false`` and keeps it. The
runtime image runs as uid 10001 (docker/runtime.Dockerfile), so its pods start under these defaults.
Pure: a pod spec in, a new pod spec out (the input is not changed).
"""

from __future__ import annotations

from typing import Any, Mapping

Obj = dict[str, Any]

RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}
# The capability whose addition the API server refuses beside allowPrivilegeEscalation: false.
_SYS_ADMIN = frozenset({"SYS_ADMIN", "CAP_SYS_ADMIN"})


def with_restricted_defaults(pod_spec: Mapping[str, Any]) -> Obj:
    """``pod_spec`` with the fields of Pod Security's ``restricted`` profile it does not set, filled.

    - pod: ``seccompProfile: RuntimeDefault``; ``runAsNonRoot: true`` unless the pod or a container
      runs as uid 0 on purpose (``runAsUser: 0``), which it would stop from starting;
    - each container and init container: ``allowPrivilegeEscalation: false`` (unless it is
      privileged or adds SYS_ADMIN, which the API server refuses beside it) and
      ``capabilities.drop: [ALL]`` (unless it is privileged; ``capabilities.add`` still adds).

    A Windows pod (``spec.os.name: windows``) is returned as it is: these are Linux settings.
    """
    spec: Obj = dict(pod_spec)
    if (spec.get("os") or {}).get("name") == "windows":
        return spec
    lists = [key for key in ("initContainers", "containers") if spec.get(key)]
    pod_context: Obj = dict(spec.get("securityContext") or {})
    pod_context.setdefault("seccompProfile", dict(RUNTIME_DEFAULT_SECCOMP))
    runs_as_root = pod_context.get("runAsUser") == 0 or any(
        (c.get("securityContext") or {}).get("runAsUser") == 0 for key in lists for c in spec[key])
    if not runs_as_root:
        pod_context.setdefault("runAsNonRoot", True)
    spec["securityContext"] = pod_context
    for key in lists:
        spec[key] = [{**c, "securityContext": _restricted_container(c.get("securityContext") or {})} for c in spec[key]]
    return spec


def _restricted_container(context: Mapping[str, Any]) -> Obj:
    filled: Obj = dict(context)
    if filled.get("privileged"):
        return filled
    capabilities: Obj = dict(filled.get("capabilities") or {})
    if "allowPrivilegeEscalation" not in filled and not _SYS_ADMIN & set(capabilities.get("add") or []):
        filled["allowPrivilegeEscalation"] = False
    capabilities.setdefault("drop", ["ALL"])
    filled["capabilities"] = capabilities
    return filled
