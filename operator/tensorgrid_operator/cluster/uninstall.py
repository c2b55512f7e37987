"""Strip the operator's finalizer from every TrainingJob: the clean way to uninstall the operator.

kopf puts the finalizer ``tensorgrid.io/operator`` on every job it holds (its daemons
require one) and only a running operator takes it off. Uninstalled first, it would
leave every job, and any namespace deleted with jobs in it, stuck Terminating.
``tensorgrid-operator --remove-finalizers`` (the Helm chart's post-delete hook runs it)
removes it, and only it, from every job; the jobs stay, and delete normally later.

A running operator puts the finalizer back at once (its own removal is an event it
sees), so this runs once no operator does: after a pass it waits a few seconds and
looks again, and says so, failing, if the finalizer keeps coming back.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import time
from typing import Any, Callable, Mapping, Optional

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import kube

SETTLE_SECONDS = 3.0
"""How long to wait after a pass before looking for finalizers an operator put back."""
ROUNDS = 3


@dataclasses.dataclass
class Result:
    stripped: list[str]
    """``namespace/name`` of the jobs whose finalizer was removed."""
    returned: list[str]
    """Jobs on which the finalizer was back after the last pass: an operator still runs."""


def _matches(namespace: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(namespace, p) for p in patterns)


def _holding(k: kube.Kube, namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    """The jobs that carry the finalizer, in the namespaces given (exact names or globs), or in all."""
    if namespaces and not any(c in p for p in namespaces for c in "*?["):
        jobs = [job for ns in namespaces for job in k.list_jobs(ns)]
    else:
        jobs = [job for job in k.list_jobs(None)
                if not namespaces or _matches(job["metadata"]["namespace"], namespaces)]
    return [job for job in jobs if spec_lib.FINALIZER in (job["metadata"].get("finalizers") or [])]


def remove_finalizers(k: kube.Kube, namespaces: tuple[str, ...], settle_seconds: float = SETTLE_SECONDS,
                      rounds: int = ROUNDS, say: Callable[[str], None] = print) -> Result:
    """Remove the operator's finalizer from every job it is on; then check that it stays off."""
    stripped: list[str] = []
    holding = _holding(k, namespaces)
    for _ in range(rounds):
        if not holding:
            break
        for job in holding:
            name = _name(job)
            if k.remove_finalizer(job, spec_lib.FINALIZER):
                stripped.append(name)
                say(f"removed the finalizer {spec_lib.FINALIZER} from trainingjob {name}")
        time.sleep(settle_seconds)
        holding = _holding(k, namespaces)
        if holding:
            say(f"the finalizer is back on {', '.join(_name(j) for j in holding)} (does an operator still run?)")
    return Result(stripped=stripped, returned=[_name(j) for j in holding])


def _name(job: Mapping[str, Any]) -> str:
    return f"{job['metadata']['namespace']}/{job['metadata']['name']}"


def run(kubeconfig: Optional[str], namespaces: tuple[str, ...]) -> int:
    """``--remove-finalizers``: the exit status (1 when an operator kept putting the finalizer back)."""
    k = kube.Kube(kube.load_config(kubeconfig), pool_size=4)
    try:
        result = remove_finalizers(k, namespaces)
    finally:
        k.close()
    where = ", ".join(namespaces) if namespaces else "every namespace"
    if result.returned:
        print(f"tensorgrid-operator: the finalizer {spec_lib.FINALIZER} keeps coming back on "
              f"{', '.join(result.returned)}: a tensorgrid-operator still runs; stop it (helm uninstall, or "
              f"kubectl scale deployment --replicas=0) and run --remove-finalizers again")
        return 1
    print(f"removed the finalizer {spec_lib.FINALIZER} from {len(set(result.stripped))} trainingjobs in {where}; "
          f"none carries it now")
    return 0
