"""``spec.replicaSpecs.PS.replication``: live replicas of the parameter servers' state, and the runtime's
environment that turns them on.

Why it exists: a PS that dies comes back empty and the chief restores the last checkpoint, losing every
update since; with replication the runtime keeps each PS's state live on another task and a restarted
PS loads it (docs/fault-tolerance.md). The runtime reads its settings from environment variables; this
module owns the field's shape, its validation, and the variables it becomes on each PS pod:

- ``enabled`` with two or more PS: a ring, each PS holds the next one's replica (the runtime finds
  the holder in TF_CONFIG, so only ``TENSORGRID_PS_REPLICATION=1`` is set);
- ``standby: true``: a standby task per PS (``tensorgrid ps-standby``, in a pod of its own behind the
  Service ``<job>-ps-<index>-standby``) holds it, and the PS gets that Service's address;
- ``maxLagSeconds``: how far a replica may lag before the PS's steps wait for it.

The names of the variables are a contract with the runtime (``tensorgrid.distributed.replication``);
the operator shares no code with it (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

REPLICATION_ENV = "TENSORGRID_PS_REPLICATION"
MAX_LAG_ENV = "TENSORGRID_PS_REPLICA_MAX_LAG_S"
REPLICA_ADDRESS_ENV = "TENSORGRID_PS_REPLICA_ADDRESS"
STANDBY_FOR_ENV = "TENSORGRID_PS_STANDBY_FOR"
# The standby pod's annotation that tells it to become its PS: the task it becomes
# (``standby_for``), which the kubelet writes into the file ``ps-standby --take-over-file`` watches.
TAKE_OVER_ANNOTATION = "tensorgrid.io/take-over"

FIELD = "spec.replicaSpecs.PS.replication"
DEFAULT_MAX_LAG_SECONDS = 1.0
STANDBY_SUFFIX = "-standby"
# The standby is a pod of its own: it listens on the runtime's usual gRPC port.
STANDBY_PORT = 2222
_KEYS = ("enabled", "standby", "maxLagSeconds")


@dataclasses.dataclass(frozen=True)
class PSReplication:
    """What ``spec.replicaSpecs.PS.replication`` asks for (off when absent)."""

    enabled: bool = False
    """Keep a live replica of every PS's state; a PS made again loads it instead of the checkpoint."""
    standby: bool = False
    """A standby pod per PS holds its replica (needed with one PS; with more, they hold each other's)."""
    max_lag_seconds: float = DEFAULT_MAX_LAG_SECONDS
    """How old a replica may be before the PS's steps wait for the next push to land."""


def parse(raw: Any, ps_replicas: int) -> PSReplication:
    """The typed field; ``ValueError`` naming the bad value and what is valid."""
    if raw is None:
        return PSReplication()
    if not isinstance(raw, Mapping):
        raise ValueError(f"{FIELD}: {raw!r} is not an object with {', '.join(_KEYS)}")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ValueError(f"{FIELD}: unknown field {unknown[0]!r}; valid: {', '.join(_KEYS)}")
    enabled, standby = raw.get("enabled", False), raw.get("standby", False)
    for name, value in (("enabled", enabled), ("standby", standby)):
        if not isinstance(value, bool):
            raise ValueError(f"{FIELD}.{name}: {value!r} is not a boolean (true or false)")
    lag = raw.get("maxLagSeconds", DEFAULT_MAX_LAG_SECONDS)
    if isinstance(lag, bool) or not isinstance(lag, (int, float)) or not math.isfinite(lag) or lag <= 0:
        raise ValueError(f"{FIELD}.maxLagSeconds: {lag!r} is not a number of seconds greater than 0")
    if standby and not enabled:
        raise ValueError(f"{FIELD}: standby: true holds a replica that enabled: false turns off; set enabled: true "
                         f"(or drop standby)")
    if enabled and ps_replicas == 0:
        raise ValueError(f"{FIELD}.enabled: the job has no PS replicas (spec.replicaSpecs.PS.replicas is 0) whose "
                         f"state could be replicated")
    if enabled and not standby and ps_replicas < 2:
        raise ValueError(f"{FIELD}: with one PS its replica needs a standby to live on: set standby: true, or use "
                         f"two or more PS replicas (each then holds the next one's)")
    return PSReplication(enabled, standby, float(lag))


def standby_name(job_name: str, index: int) -> str:
    """``<job>-ps-<index>-standby``: the standby's Deployment, Service and TLS Secret (``<name>-tls``)."""
    return f"{job_name}-ps-{index}{STANDBY_SUFFIX}"


def standby_address(job_name: str, namespace: str, index: int) -> str:
    """The standby's address the PS dials: its headless Service's DNS name and port."""
    return f"{standby_name(job_name, index)}.{namespace}.svc:{STANDBY_PORT}"


def ps_env(replication: PSReplication, job_name: str, namespace: str, index: int) -> list[tuple[str, str]]:
    """The runtime's variables for PS ``index``: none when replication is off."""
    if not replication.enabled:
        return []
    env = [(REPLICATION_ENV, "1"), (MAX_LAG_ENV, f"{replication.max_lag_seconds:g}")]
    if replication.standby:
        env.append((REPLICA_ADDRESS_ENV, standby_address(job_name, namespace, index)))
    return env


def standby_for(index: int) -> str:
    """The PS task a standby holds the replica of, as the runtime names it."""
    return f"/job:ps/replica:0/task:{index}"
