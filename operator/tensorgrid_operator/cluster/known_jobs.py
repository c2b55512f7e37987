"""Each job as the operator last read or wrote it, until its watch says it changed.

A reconcile used to begin with a GET of its job, and a job is reconciled many times
while its pods are created, scheduled and started (each pod event wakes it): at 1,000
jobs those GETs were a fifth of the operator's API calls. Most of those passes are
woken by the job's pods, not by the job; the job is what this operator last read or
wrote (its status PATCH answers with the whole object). So the job is kept here and
read again only when the job's own watch shows a change the operator did not make, or
the status PATCH answers 409 (the job moved on meanwhile).

A change can land while a GET is on its way: the GET may answer with the job as it was
before, and the watch event of the change arrive before the answer is kept. Each
key's count of changes seen (:meth:`KnownJobs.changes`) is taken before a read or a
write and handed to :meth:`KnownJobs.remember`, which keeps the answer only if no change
was seen since; otherwise the next pass reads again.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

Obj = dict[str, Any]


class KnownJobs:
    """The last job each key read or wrote, and the resourceVersion of the operator's own last write."""

    def __init__(self) -> None:
        self._jobs: dict[Hashable, Obj] = {}
        self._changes: dict[Hashable, int] = {}
        self._written: dict[Hashable, str] = {}

    def changes(self, key: Hashable) -> int:
        """How many changes of the job the watch showed: take it before a read or a write."""
        return self._changes.get(key, 0)

    def remember(self, key: Hashable, job: Obj, changes_before: int, written: bool = False) -> None:
        """Keep ``job`` (read or written after ``changes_before`` was taken), unless the watch showed a
        change since; ``written``: it is the answer to this operator's own write, whose echo is no change."""
        if written:
            self._written[key] = str(job["metadata"]["resourceVersion"])
        if self._changes.get(key, 0) == changes_before:
            self._jobs[key] = job
        else:
            self._jobs.pop(key, None)

    def get(self, key: Hashable) -> Optional[Obj]:
        """The job as last read or written, or ``None``: read it."""
        return self._jobs.get(key)

    def seen(self, key: Hashable, resource_version: Optional[str]) -> bool:
        """The watch showed the job at ``resource_version``; ``False`` for the echo of the operator's own
        write (nothing new), ``True`` for a change: the job is read again at the next pass."""
        if resource_version is not None and resource_version == self._written.get(key):
            return False
        self._changes[key] = self._changes.get(key, 0) + 1
        self._jobs.pop(key, None)
        return True

    def forget(self, key: Hashable) -> None:
        """Read the job again at the next pass (after a conflict, or on the periodic resync)."""
        self._jobs.pop(key, None)

    def drop(self, key: Hashable) -> None:
        """The job's loop ended: nothing of it is kept."""
        self._jobs.pop(key, None)
        self._changes.pop(key, None)
        self._written.pop(key, None)
