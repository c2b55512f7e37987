"""Which recovery a parameter server's new pod made: its live replica, or the checkpoint.

With ``spec.replicaSpecs.PS.replication`` a PS pod that replaces a lost one loads its
predecessor's state from the live replica; where no replica could be had (its holder died
too, or replication is off) it starts empty, and the chief restores the last checkpoint
(or initializes the model when there is none): the updates since that checkpoint are lost.
The runtime says which on the PS's metrics page, once the start's load has ended
(``tensorgrid_ps_started_from_replica{task}``: 1 or 0, absent while it loads); the
operator reads it with the progress (``reconcile.progress``, ``controller.progress_reader``)
and writes here what it found:

- ``status.parameterServerStarts``: per PS replica, its last pod seen (name and uid; and
  ``containerRestarts``, its main container's restarts then: a container restarted in the same
  pod, as the PS a standby became restarts, is a new start of that PS too) and how its state
  began: ``Initial`` (the first pod recorded, started empty: nothing to recover), ``LiveReplica``
  (it loaded the live replica) or ``Checkpoint`` (it started empty after an earlier pod, or
  process, of that PS was recorded: the checkpoint fallback);
- on a new pod that loaded a replica, or fell back: the condition ``PSStateRecovered``
  (True, ``LoadedLiveReplica``; False, ``RestoredCheckpoint``) and an Event of that reason
  (Normal; Warning). A first pod that started empty sets neither: nothing was lost.

Pure: the GETs and the status write are in ``controller.progress_reader``.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib

Obj = dict[str, Any]

FIELD = "parameterServerStarts"
CONDITION = "PSStateRecovered"
LOADED_LIVE_REPLICA = "LoadedLiveReplica"
RESTORED_CHECKPOINT = "RestoredCheckpoint"
# How a PS pod's state began (status.parameterServerStarts[].source).
INITIAL, LIVE_REPLICA, CHECKPOINT = "Initial", "LiveReplica", "Checkpoint"


@dataclasses.dataclass(frozen=True)
class PSStart:
    """What one running PS pod's metrics page said of its start."""

    replica: str
    """The PS replica (``ps-0``)."""
    pod: str
    uid: str
    from_replica: bool
    container_restarts: int = 0
    """The restarts of the pod's main container when read (its ``status.containerStatuses[].restartCount``):
    a new count is a new process, so a new start, in the same pod."""


@dataclasses.dataclass(frozen=True)
class Report:
    """What one reading changes in the job's status, and what is said."""

    starts: list[Obj]
    """The new ``status.parameterServerStarts``."""
    conditions: list[Obj]
    """The job's conditions, with ``PSStateRecovered`` set when a PS's new pod recovered."""
    events: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    """(type, reason, message) of the Events to post on the job."""

    def patch(self, old_status: Mapping[str, Any]) -> Obj:
        """The fields of a status merge patch that changed (empty: none)."""
        patch: Obj = {}
        if self.starts != list(old_status.get(FIELD) or []):
            patch[FIELD] = self.starts
        if self.conditions != list(old_status.get("conditions") or []):
            patch["conditions"] = self.conditions
        return patch


def _source(earlier: Optional[Mapping[str, Any]], from_replica: bool) -> str:
    if from_replica:
        return LIVE_REPLICA
    return INITIAL if earlier is None else CHECKPOINT


def report(old_status: Mapping[str, Any], seen: Sequence[PSStart], now: datetime.datetime) -> Report:
    """The job's PS starts after a reading in which ``seen`` PS pods said how they started."""
    recorded: dict[str, Obj] = {str(s.get("replica")): dict(s) for s in old_status.get(FIELD) or []}
    conditions = [dict(c) for c in old_status.get("conditions") or []]
    loaded: list[str] = []
    fell_back: list[str] = []
    for start in sorted(seen, key=lambda s: s.replica):
        earlier = recorded.get(start.replica)
        if earlier is not None and earlier.get("podUID") == start.uid \
                and int(earlier.get("containerRestarts") or 0) == start.container_restarts:
            continue
        source = _source(earlier, start.from_replica)
        recorded[start.replica] = {"replica": start.replica, "pod": start.pod, "podUID": start.uid,
                                   "source": source, "time": cond_lib.format_time(now)}
        if start.container_restarts:
            recorded[start.replica]["containerRestarts"] = start.container_restarts
        if source == LIVE_REPLICA:
            loaded.append(start.pod)
        elif source == CHECKPOINT:
            fell_back.append(start.pod)
    events: list[tuple[str, str, str]] = []
    loaded_message = (f"{', '.join(loaded)} loaded {'its' if len(loaded) == 1 else 'their'} predecessor's state "
                      f"from the live replica: at most the replica's lag (maxLagSeconds) of updates lost")
    fell_back_message = (f"{', '.join(fell_back)} started empty after an earlier pod (or process) of that parameter "
                         f"server (no live replica could be loaded, or replication is off): the chief restores the last "
                         f"checkpoint, or initializes the model where there is none; the updates since are lost")
    if loaded:
        events.append(("Normal", LOADED_LIVE_REPLICA, loaded_message))
    if fell_back:
        events.append(("Warning", RESTORED_CHECKPOINT, fell_back_message))
        message = fell_back_message + (f"; {loaded_message}" if loaded else "")
        cond_lib.set_condition(conditions, CONDITION, False, RESTORED_CHECKPOINT, message, now)
    elif loaded:
        cond_lib.set_condition(conditions, CONDITION, True, LOADED_LIVE_REPLICA, loaded_message, now)
    return Report([recorded[r] for r in sorted(recorded)], conditions, events)
