"""When a reconcile may use the job it last read or wrote, and when it must read it again (known_jobs)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tensorgrid_operator.cluster import known_jobs

KEY = ("ns", "job")


def job(resource_version: str) -> dict[str, Any]:
    return {"metadata": {"name": "job", "namespace": "ns", "resourceVersion": resource_version}}


def read(jobs: known_jobs.KnownJobs, resource_version: str) -> None:
    """A GET that answered with the job at ``resource_version``, nothing seen meanwhile."""
    jobs.remember(KEY, job(resource_version), jobs.changes(KEY))


def written(jobs: known_jobs.KnownJobs, resource_version: str) -> None:
    """The operator's status PATCH, answered with the job at ``resource_version``."""
    jobs.remember(KEY, job(resource_version), jobs.changes(KEY), written=True)


def change_during_read(jobs: known_jobs.KnownJobs) -> None:
    """A GET is sent; the watch shows a change (rv 7) before the GET's answer (rv 5, older) is kept."""
    before = jobs.changes(KEY)
    assert jobs.seen(KEY, "7")
    jobs.remember(KEY, job("5"), before)


def change_during_write(jobs: known_jobs.KnownJobs) -> None:
    before = jobs.changes(KEY)
    assert jobs.seen(KEY, "7")
    jobs.remember(KEY, job("8"), before, written=True)


CASES: list[tuple[str, list[Callable[[known_jobs.KnownJobs], None]], str | None]] = [
    ("nothing read yet: read", [], None),
    ("read: kept", [lambda j: read(j, "5")], "5"),
    ("written: the answer is kept", [lambda j: read(j, "5"), lambda j: written(j, "6")], "6"),
    ("the echo of its own write changes nothing",
     [lambda j: read(j, "5"), lambda j: written(j, "6"), lambda j: j.seen(KEY, "6")], "6"),
    ("a change by someone else: read again",
     [lambda j: read(j, "5"), lambda j: j.seen(KEY, "9")], None),
    ("the echo of an earlier write after a later one: read again",
     [lambda j: written(j, "6"), lambda j: written(j, "8"), lambda j: j.seen(KEY, "6")], None),
    ("a change seen while the read was on its way: the read's answer is not kept", [change_during_read], None),
    ("a change seen while a write was on its way: read again", [change_during_write], None),
    ("read after such a change: kept", [change_during_read, lambda j: read(j, "7")], "7"),
    ("forgotten (a conflict, the resync): read again", [lambda j: read(j, "5"), lambda j: j.forget(KEY)], None),
    ("the loop ended: nothing kept", [lambda j: written(j, "6"), lambda j: j.drop(KEY)], None),
]


@pytest.mark.parametrize("steps,expected", [(steps, expected) for _, steps, expected in CASES],
                         ids=[name for name, _, _ in CASES])
def test_the_job_is_used_until_a_change_the_operator_did_not_make_is_seen(
        steps: list[Callable[[known_jobs.KnownJobs], None]], expected: str | None) -> None:
    jobs = known_jobs.KnownJobs()
    for step in steps:
        step(jobs)
    kept = jobs.get(KEY)
    assert (kept["metadata"]["resourceVersion"] if kept is not None else None) == expected


def test_the_echo_of_its_own_write_is_no_change_and_others_are() -> None:
    jobs = known_jobs.KnownJobs()
    written(jobs, "6")
    assert not jobs.seen(KEY, "6")
    assert jobs.seen(KEY, "7")
    assert jobs.seen(KEY, None)


def test_jobs_are_kept_apart() -> None:
    jobs = known_jobs.KnownJobs()
    read(jobs, "5")
    other = ("ns", "other")
    jobs.remember(other, job("3"), jobs.changes(other))
    jobs.seen(other, "4")
    kept = jobs.get(KEY)
    assert kept is not None and kept["metadata"]["resourceVersion"] == "5"
    assert jobs.get(other) is None
