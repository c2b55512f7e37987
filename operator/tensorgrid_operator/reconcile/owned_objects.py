"""Keeping a job's NetworkPolicy and PodDisruptionBudget in place while it runs.

The operator creates them when it first reconciles a job (``jobobjects``). A user or a
tool that deletes one afterwards would leave the job unprotected until the operator
restarts; so the operator watches them (kopf indexes of the objects labelled with a job,
no LIST per pass) and each pass decides here, from what the index shows and what this
operator already did, which objects to create:

- shown in the index (owned by this job): nothing to do, and it is remembered as seen;
- never created by this operator run: create it (an existing one answers 409, which is fine);
- seen once and now gone: it was deleted, create it again and say so (an Event);
- created but not shown yet: the index lags behind the create, or an object of that name
  exists that is not labelled as the job's: wait rather than create again each pass.

Pure: the running operator holds an :class:`Upkeep` per job, and ``cluster.ensure_objects``
makes the API calls.
"""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any, Mapping, Optional, Sequence

ObjectKey = tuple[str, str]
"""(kind, name) of an owned object."""


@dataclasses.dataclass
class Upkeep:
    """What this operator knows of one job's owned objects (held from the job's first pass to its end)."""

    made: set[ObjectKey] = dataclasses.field(default_factory=set)
    """Objects this operator created, or found already there (409)."""
    seen: set[ObjectKey] = dataclasses.field(default_factory=set)
    """Objects the index has shown owned by the job at least once."""
    last_error: str = ""
    """The last creation errors, said once (a Warning event) until they change."""
    pod_group_error: str = ""
    """Why the job's PodGroup could not be created (ensure_objects.pod_group), said once until it changes."""
    cert_manager_error: str = ""
    """Why the job's cert-manager objects could not be made (ensure_objects.cert_manager_objects), said once
    until it changes."""
    ps_standby_error: str = ""
    """Why the job's PS standbys could not be made (cluster.ps_standbys), said once until it changes."""
    pod_group_fresh: bool = False
    """The PodGroup was created in this pass: the pods it creates need not ask for it again."""
    pod_group_read_due: float = 0.0
    """When (monotonic) the PodGroup's status is read next (``ensure_objects.pod_group_status``)."""
    pod_group_reads_while_running: int = 0
    """Reads of the PodGroup since the job's pods all run (``podgroup_status.SETTLE_READS`` at most)."""
    pod_group_read_error: str = ""
    """Why the PodGroup could not be read, said once until it changes."""
    pod_group_min_member: Optional[int] = None
    """The PodGroup's ``minMember`` as this operator made, patched or read it; ``None``: not known (a group
    found already there, or deleted since): ``ensure_objects.resize_pod_group`` reads it when it matters."""
    pod_group_resize_error: str = ""
    """Why the PodGroup could not be resized, said once until it changes."""


@dataclasses.dataclass(frozen=True)
class Creation:
    """One object to create in this pass."""

    kind: str
    name: str
    obj: Mapping[str, Any]
    recreated: bool
    """The object existed and was deleted: the creation is announced with an Event."""


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    return str(obj["kind"]), str(obj["metadata"]["name"])


def present(entries: Sequence[tuple[str, str, str]], job_uid: str) -> set[ObjectKey]:
    """The (kind, name) of index entries ``(kind, name, owner uid)`` that belong to the job of that uid.

    An object of a deleted job of the same name (garbage collection pending) is not the job's.
    """
    return {(kind, name) for kind, name, owner in entries if owner == job_uid}


def creations(wanted: Sequence[Mapping[str, Any]], shown: AbstractSet[ObjectKey], upkeep: Upkeep) -> list[Creation]:
    """The objects of ``wanted`` to create now; marks the shown ones as seen in ``upkeep``."""
    result = []
    for obj in wanted:
        key = key_of(obj)
        if key in shown:
            upkeep.seen.add(key)
        elif key in upkeep.seen:
            result.append(Creation(key[0], key[1], obj, recreated=True))
        elif key not in upkeep.made:
            result.append(Creation(key[0], key[1], obj, recreated=False))
    return result


def created(upkeep: Upkeep, creation: Creation) -> None:
    """Records a creation that succeeded (or found the object there): it is no longer seen, until shown again."""
    upkeep.made.add((creation.kind, creation.name))
    upkeep.seen.discard((creation.kind, creation.name))


def owner_uid(metadata: Mapping[str, Any]) -> str:
    """The uid of the controller owner reference of an object ('' if it has none)."""
    for reference in metadata.get("ownerReferences") or []:
        if reference.get("controller"):
            return str(reference.get("uid") or "")
    return ""


def recreated_message(creation: Creation) -> str:
    return (f"{creation.kind} {creation.name} of the job was deleted; created it again (delete the TrainingJob, "
            f"or turn the object off in the operator's settings, to do without it)")
