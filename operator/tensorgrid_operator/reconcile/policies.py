"""The job's policies as small pure verdicts: retry or not, how long to wait, who decides success.

``reconcile`` walks the job and calls these; each answers one question from the spec
and what was observed, with the reason in words (events and status quote it).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import conditions
from tensorgrid_operator.api import exitcodes
from tensorgrid_operator.api import spec as spec_lib

RT = spec_lib.ReplicaType

# Replica types whose permanent failure fails the job (an evaluator's does not).
FATAL_TYPES = frozenset({RT.CHIEF, RT.WORKER, RT.PS})
# A chief or worker that fails this soon after a parameter server was last seen down failed
# because of it (its calls to the PS broke): recreated without counting against backoffLimit.
PS_COLLATERAL_SECONDS = 120.0


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


def ps_down(view: Optional[Any]) -> bool:
    """Whether a parameter server's pod (a ``podview.PodView``, ``None`` when there is none) serves no one now."""
    return view is None or view.terminating or view.phase != "Running"


def collateral_of_ps_loss(key: spec_lib.ReplicaKey, policy: spec_lib.RestartPolicy, succeeded: bool,
                          ps_loss: Optional[Mapping[str, Any]], now: datetime.datetime) -> str:
    """Why a failed chief or worker is collateral of a parameter server's loss; empty when it is not.

    ``restartPolicy: Never`` is kept: such a replica is not recreated whatever the cause.
    """
    if succeeded or key.rtype not in (RT.CHIEF, RT.WORKER) or policy is spec_lib.RestartPolicy.NEVER \
            or not ps_loss:
        return ""
    seen = conditions.parse_time(ps_loss.get("lastSeenDown"))
    if seen is None or (now - seen).total_seconds() > PS_COLLATERAL_SECONDS:
        return ""
    replicas = ", ".join(ps_loss.get("replicas") or [])
    return (f"it failed within {PS_COLLATERAL_SECONDS:g}s of parameter server {replicas} being down (last seen "
            f"down at {ps_loss['lastSeenDown']}): collateral of that loss, not counted against backoffLimit")


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


@dataclasses.dataclass(frozen=True)
class RetryDelay:
    """How long a replica waits before it is created again, after it failed or its creation did.

    As the kubelet's CrashLoopBackOff and the Job controller do: the delay doubles with
    each failure of the same replica, so a pod the kubelet rejects at admission, or a
    namespace out of quota, does not burn ``backoffLimit`` (or the API server) in seconds.
    """

    initial_seconds: float = 10.0
    """The wait after a replica's first failure; each further failure doubles it."""
    max_seconds: float = 300.0
    """The wait never grows past this."""

    @property
    def reset_seconds(self) -> float:
        """A replica that has not failed for this long since its last retry starts again from the initial wait."""
        return 2 * self.max_seconds

    def seconds(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1 for the first) of one replica."""
        return min(self.initial_seconds * 2.0 ** min(max(attempt - 1, 0), 32), self.max_seconds)


def backoff_entry(previous: Optional[Mapping[str, Any]], delay: RetryDelay, now: datetime.datetime, replica: str,
                  reason: str, message: str) -> dict[str, Any]:
    """The ``status.replicaBackoff`` record of a replica that just failed (or whose creation failed).

    ``attempts`` counts the replica's failures in a row: it starts over when the last
    retry is older than ``delay.reset_seconds``.
    """
    attempts = 1
    if previous is not None and not backoff_expired(previous, delay, now):
        attempts = int(previous.get("attempts", 0)) + 1
    retry_at = now + datetime.timedelta(seconds=delay.seconds(attempts))
    if retry_at.microsecond:  # the status holds whole seconds: round up, never retry early
        retry_at += datetime.timedelta(microseconds=1_000_000 - retry_at.microsecond)
    return {"replica": replica, "attempts": attempts, "nextRetryTime": conditions.format_time(retry_at),
            "reason": reason, "message": message}


def backoff_expired(entry: Mapping[str, Any], delay: RetryDelay, now: datetime.datetime) -> bool:
    """Whether the replica's last retry is old enough for its failures in a row to be forgotten."""
    last_retry = conditions.parse_time(entry.get("nextRetryTime"))
    return last_retry is None or (now - last_retry).total_seconds() >= delay.reset_seconds


def seconds_until_retry(entry: Optional[Mapping[str, Any]], now: datetime.datetime) -> float:
    """How long the replica of this record still waits; 0 when it may be created now."""
    retry_at = conditions.parse_time((entry or {}).get("nextRetryTime"))
    return 0.0 if retry_at is None else max(0.0, (retry_at - now).total_seconds())


def retry_note(entry: Mapping[str, Any], now: datetime.datetime) -> str:
    """``next attempt in 20s, at <time>``: how the condition messages and events say when."""
    return f"next attempt in {seconds_until_retry(entry, now):.0f}s, at {entry['nextRetryTime']}"
