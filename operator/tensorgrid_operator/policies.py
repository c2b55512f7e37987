"""The job's policies as small pure verdicts: retry or not, who decides success, when it is reached.

``reconcile`` walks the job and calls these; each answers one question from the spec
and what was observed, with the reason in words (events and status quote it).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from tensorgrid_operator import conditions
from tensorgrid_operator import exitcodes
from tensorgrid_operator import spec as spec_lib

RT = spec_lib.ReplicaType

# Replica types whose permanent failure fails the job (an evaluator's does not).
FATAL_TYPES = frozenset({RT.CHIEF, RT.WORKER, RT.PS})


def retry_verdict(policy: spec_lib.RestartPolicy, succeeded: bool, exit_code: Optional[int],
                  decides_success: bool) -> tuple[bool, str]:
    """Whether a replica that ended should run again, and why (for events and status).

    ``Always`` restarts a replica that exited 0 too, unless its success is what ends
    the job (the chief, or every worker under ``AllWorkers``): that exit is the
    job finishing, not something to undo.
    """
    if succeeded:
        if policy is spec_lib.RestartPolicy.ALWAYS and not decides_success:
            return True, "exited 0 and restartPolicy is Always"
        return False, "exited 0"
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    if policy is spec_lib.RestartPolicy.NEVER:
        return False, f"{code}; restartPolicy is Never"
    if policy in (spec_lib.RestartPolicy.ON_FAILURE, spec_lib.RestartPolicy.ALWAYS):
        return True, f"{code}; restartPolicy is {policy.value}"
    verdict = exitcodes.classify(exit_code)
    if verdict is exitcodes.ExitClass.RETRYABLE:
        return True, f"{code} is retryable under restartPolicy ExitCode"
    return False, f"{code} is permanent under restartPolicy ExitCode"


def decides_success(job_spec: spec_lib.JobSpec, key: spec_lib.ReplicaKey) -> bool:
    if job_spec.success_policy is spec_lib.SuccessPolicy.ALL_WORKERS:
        return key.rtype in (RT.CHIEF, RT.WORKER)
    return key == spec_lib.chief_key(job_spec)


def success_reached(job_spec: spec_lib.JobSpec, finished: Mapping[str, Mapping[str, Any]]) -> Optional[str]:
    """The success message when the success policy is met, else ``None``. PS and Evaluator never decide."""
    def ok(key: spec_lib.ReplicaKey) -> bool:
        return finished.get(key.short_name, {}).get("outcome") == conditions.SUCCEEDED

    if job_spec.success_policy is spec_lib.SuccessPolicy.ALL_WORKERS:
        deciders = [k for k in spec_lib.all_replicas(job_spec) if k.rtype in (RT.CHIEF, RT.WORKER)]
        if deciders and all(ok(k) for k in deciders):
            return f"all {len(deciders)} chief and worker replicas succeeded"
        return None
    chief = spec_lib.chief_key(job_spec)
    if chief is not None and ok(chief):
        return f"{chief.short_name} succeeded"
    return None
