"""``status.finishedReplicas`` kept compact: one entry per kind of ending, with the replicas' indexes as ranges.

The record of replicas that finished for good must survive their pods (a completed pod
that is deleted is never run again), so it lives in the job's status, which etcd holds
in one object of at most 1.5 MiB. One entry per replica cost about 210 bytes: 3,000
finished workers made a 633 KB status. Replicas of one type that ended the same way
(outcome, reason, message, exit code) share one entry whose ``indexes`` reads
``0-2999`` or ``0-3,5,7-9``: a job whose workers all succeed has one entry, whatever
its size. A reconcile expands the entries into one record per replica and compacts
them again when it writes the status; entries of the older one-per-replica form
(``replica``, ``index``) are still read.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tensorgrid_operator.api import spec as spec_lib

Obj = dict[str, Any]
# What replicas must share to be one entry.
GROUP_FIELDS = ("type", "outcome", "reason", "message", "exitCode")


def format_ranges(indexes: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2,5,7-8``."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = prev = None
    for i in ordered:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def parse_ranges(text: str) -> list[int]:
    """``0-2,5`` -> ``[0, 1, 2, 5]``; a malformed text raises ``ValueError`` naming it."""
    indexes: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise ValueError(f"finishedReplicas indexes {text!r}: expected ranges like 0-3,5") from None
        if first < 0 or last < first:
            raise ValueError(f"finishedReplicas indexes {text!r}: {part!r} is not an ascending range of indexes")
        indexes.extend(range(first, last + 1))
    return indexes


def expand(entries: Iterable[Mapping[str, Any]]) -> dict[str, Obj]:
    """One record per replica, keyed by its short name (``worker-3``), from the status's entries."""
    records: dict[str, Obj] = {}
    for entry in entries:
        shared = {k: entry[k] for k in (*GROUP_FIELDS, "finishedTime") if k in entry}
        if "indexes" in entry:
            indexes = parse_ranges(str(entry["indexes"]))
        else:  # one replica per entry, as older operators wrote
            indexes = [int(entry["index"])]
        for index in indexes:
            key = spec_lib.ReplicaKey(spec_lib.ReplicaType(shared["type"]), index)
            records[key.short_name] = {**shared, "replica": key.short_name, "index": index}
    return records


def compact(records: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The status's entries: replicas that ended the same way share one; ``finishedTime`` is the latest."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(record.get(k) for k in GROUP_FIELDS), []).append(record)
    entries = []
    for members in groups.values():
        first = members[0]
        entry: Obj = {k: first[k] for k in GROUP_FIELDS if first.get(k) is not None}
        entry["indexes"] = format_ranges(int(r["index"]) for r in members)
        times = [str(r["finishedTime"]) for r in members if r.get("finishedTime")]
        if times:
            entry["finishedTime"] = max(times)
        entries.append(entry)
    return sorted(entries, key=lambda e: (e["type"], parse_ranges(e["indexes"])[0], e["outcome"]))
