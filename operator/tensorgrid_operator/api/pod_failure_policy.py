"""``spec.replicaSpecs.<type>.podFailurePolicy``: rules, shaped like batch/v1 Job's, that decide a failed pod's fate.

Why it exists: the built-in exit-code table (``exitcodes``) is right for most programs, but only
the user knows that exit code 42 means "bad input, never retry" or that 3 means "a transient
storage error, retry it". Each rule matches a failed pod by the exit codes of its containers or
by its conditions, and the first rule that matches decides:

- ``FailJob``: the whole job fails at once (its running pods are stopped);
- ``Ignore``: the pod is recreated without counting against ``backoffLimit``;
- ``Count``: the failure is handled as without a policy (``restartPolicy`` and the exit-code
  table), a retry counting against ``backoffLimit``; it only stops later rules from matching;
- ``Retry`` (tensorgrid's addition; a Job has no permanent exit codes): the pod is recreated,
  counting against ``backoffLimit``, even where ``restartPolicy`` or the table would not.

When no rule matches, the built-in handling decides as it did before. This module owns the
field's shape, its validation (the CRD's rules, and what the schema cannot say: that a rule's
``containerName`` is a container of the template) and :func:`first_match`, the pure decision.
Like the Job controller, exit code 0 never matches (a container that succeeded did not fail the pod).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, Optional, Sequence

# Kubernetes' bounds for batch/v1 Job's podFailurePolicy (pkg/apis/batch/validation).
MAX_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_POD_CONDITIONS = 20
INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
# The Failed condition's reason, the event's and the metrics' label for a decision by a rule.
REASON = "PodFailurePolicy"


class Action(str, enum.Enum):
    FAIL_JOB = "FailJob"
    IGNORE = "Ignore"
    COUNT = "Count"
    RETRY = "Retry"


class Operator(str, enum.Enum):
    IN = "In"
    NOT_IN = "NotIn"


class ConditionStatus(str, enum.Enum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclasses.dataclass(frozen=True)
class OnExitCodes:
    """Matches a pod one of whose containers ended with a non-zero code that is (``In``) or is not (``NotIn``) listed."""

    operator: Operator
    values: tuple[int, ...]
    container_name: Optional[str] = None
    """Only this container's (or init container's) exit code counts; ``None``: any container's."""


@dataclasses.dataclass(frozen=True)
class OnPodCondition:
    """Matches a pod that has the condition ``type`` with this ``status``."""

    type: str
    status: ConditionStatus = ConditionStatus.TRUE


@dataclasses.dataclass(frozen=True)
class Rule:
    action: Action
    on_exit_codes: Optional[OnExitCodes] = None
    on_pod_conditions: tuple[OnPodCondition, ...] = ()
    """Exactly one of ``on_exit_codes`` and ``on_pod_conditions`` is set; any one condition matches."""


@dataclasses.dataclass(frozen=True)
class PodFailurePolicy:
    """The rules of one replica type, in order; empty: the built-in handling alone."""

    rules: tuple[Rule, ...] = ()


@dataclasses.dataclass(frozen=True)
class FailedPod:
    """What the rules read from a failed pod."""

    name: str
    """The replica (``worker-1``), as the messages name it."""
    container_exit_codes: Sequence[tuple[str, int]] = ()
    """(container name, exit code) of every terminated container, init containers included."""
    conditions: Sequence[tuple[str, str]] = ()
    """(type, status) of every pod condition."""


@dataclasses.dataclass(frozen=True)
class Match:
    """The rule that decided a failed pod, and how it is said in status, events and messages."""

    index: int
    action: Action
    what: str
    """What matched: ``exit code 42 of container tensorflow`` or ``pod condition DisruptionTarget=True``."""
    replica: str

    @property
    def message(self) -> str:
        return f"{REASON}: rule {self.index} ({self.action.value} on {self.what}) matched {self.replica}"


def first_match(policy: PodFailurePolicy, pod: FailedPod) -> Optional[Match]:
    """The first rule that matches the failed ``pod``; ``None`` when none does (the built-in handling decides)."""
    for index, rule in enumerate(policy.rules):
        what = _matches(rule, pod)
        if what is not None:
            return Match(index, rule.action, what, pod.name)
    return None


def _matches(rule: Rule, pod: FailedPod) -> Optional[str]:
    if rule.on_exit_codes is not None:
        req = rule.on_exit_codes
        for container, code in pod.container_exit_codes:
            if code == 0 or (req.container_name is not None and container != req.container_name):
                continue
            if (code in req.values) == (req.operator is Operator.IN):
                return f"exit code {code} of container {container}"
        return None
    for cond in rule.on_pod_conditions:
        if (cond.type, cond.status.value) in pod.conditions:
            return f"pod condition {cond.type}={cond.status.value}"
    return None


def parse(raw: Any, field: str, container_names: Sequence[str]) -> PodFailurePolicy:
    """The typed policy at ``field``; ``ValueError`` naming the bad value and what is valid.

    ``container_names``: the template's containers and init containers, which a rule's
    ``containerName`` must name.
    """
    if raw is None:
        return PodFailurePolicy()
    if not isinstance(raw, Mapping) or set(raw) - {"rules"}:
        raise ValueError(f"{field}: {raw!r} is not an object with rules (a list of rules)")
    rules = raw.get("rules") or []
    if not isinstance(rules, list):
        raise ValueError(f"{field}.rules: {rules!r} is not a list of rules")
    if len(rules) > MAX_RULES:
        raise ValueError(f"{field}.rules: {len(rules)} rules; at most {MAX_RULES}")
    return PodFailurePolicy(tuple(_rule(r, f"{field}.rules[{i}]", container_names) for i, r in enumerate(rules)))


def _rule(raw: Any, field: str, container_names: Sequence[str]) -> Rule:
    keys = ("action", "onExitCodes", "onPodConditions")
    if not isinstance(raw, Mapping):
        raise ValueError(f"{field}: {raw!r} is not a rule (an object with {', '.join(keys)})")
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ValueError(f"{field}: unknown field {unknown[0]!r}; valid: {', '.join(keys)}")
    action = _enum(Action, raw.get("action"), f"{field}.action")
    on_exit, on_conditions = raw.get("onExitCodes"), raw.get("onPodConditions")
    if (on_exit is None) == (not on_conditions):
        raise ValueError(f"{field}: give exactly one of onExitCodes and onPodConditions (a non-empty list); "
                         f"got {'both' if on_exit is not None else 'neither'}")
    if on_exit is not None:
        return Rule(action, on_exit_codes=_on_exit_codes(on_exit, f"{field}.onExitCodes", container_names))
    if not isinstance(on_conditions, list) or len(on_conditions) > MAX_POD_CONDITIONS:
        raise ValueError(f"{field}.onPodConditions: {on_conditions!r} is not a list of at most {MAX_POD_CONDITIONS} "
                         f"pod conditions")
    return Rule(action, on_pod_conditions=tuple(_on_pod_condition(c, f"{field}.onPodConditions[{i}]")
                                                for i, c in enumerate(on_conditions)))


def _on_exit_codes(raw: Any, field: str, container_names: Sequence[str]) -> OnExitCodes:
    keys = ("containerName", "operator", "values")
    if not isinstance(raw, Mapping) or set(raw) - set(keys):
        raise ValueError(f"{field}: {raw!r} is not an object with {', '.join(keys)}")
    operator = _enum(Operator, raw.get("operator"), f"{field}.operator")
    container = raw.get("containerName")
    if container is not None and container not in container_names:
        raise ValueError(f"{field}.containerName: {container!r} is not a container of the template; valid: "
                         f"{', '.join(container_names) or 'none (the template has no containers)'}")
    values = raw.get("values")
    if not isinstance(values, list) or not values or len(values) > MAX_EXIT_CODE_VALUES:
        raise ValueError(f"{field}.values: {values!r} is not a list of 1 to {MAX_EXIT_CODE_VALUES} exit codes")
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
            raise ValueError(f"{field}.values[{i}]: {value!r} is not an exit code (a 32-bit integer)")
        if operator is Operator.IN and value == 0:
            raise ValueError(f"{field}.values[{i}]: 0 is not valid for the In operator (exit code 0 never fails a pod)")
        if value in values[:i]:
            raise ValueError(f"{field}.values[{i}]: {value} is a duplicate; each exit code once")
    if values != sorted(values):
        raise ValueError(f"{field}.values: {values} must be in ascending order")
    return OnExitCodes(operator, tuple(values), container)


def _on_pod_condition(raw: Any, field: str) -> OnPodCondition:
    if not isinstance(raw, Mapping) or set(raw) - {"type", "status"}:
        raise ValueError(f"{field}: {raw!r} is not a pod condition (an object with type and status)")
    ctype = raw.get("type")
    if not isinstance(ctype, str) or not ctype:
        raise ValueError(f"{field}.type: {ctype!r} is not a pod condition type (e.g. DisruptionTarget)")
    return OnPodCondition(ctype, _enum(ConditionStatus, raw.get("status", "True"), f"{field}.status"))


def _enum(cls: type[enum.Enum], value: Any, field: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        raise ValueError(f"{field}: unsupported value {value!r}; valid: "
                         f"{', '.join(str(m.value) for m in cls)}") from None
