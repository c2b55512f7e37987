"""Which of a job's NetworkPolicy and PodDisruptionBudget a pass creates, from the index and what it did before."""

from __future__ import annotations

from typing import Any

import pytest

from tensorgrid_operator.reconcile import owned_objects

POLICY: dict[str, Any] = {"kind": "NetworkPolicy", "metadata": {"name": "job"}}
BUDGET: dict[str, Any] = {"kind": "PodDisruptionBudget", "metadata": {"name": "job-ps"}}
P, B = ("NetworkPolicy", "job"), ("PodDisruptionBudget", "job-ps")


@pytest.mark.parametrize("shown, made, seen, expected", [
    # the first pass: both are created, neither announced
    (set(), set(), set(), [(P, False), (B, False)]),
    # created, the index has not shown them yet (or a same-named object is not labelled as the job's): wait
    (set(), {P, B}, set(), []),
    # both shown: nothing to do
    ({P, B}, {P, B}, set(), []),
    # the policy was seen and is gone: deleted by someone, created again and announced
    ({B}, {P, B}, {P, B}, [(P, True)]),
    # both deleted
    (set(), {P, B}, {P, B}, [(P, True), (B, True)]),
    # an operator that starts on a running job: created (409 if they exist), never announced
    ({P}, set(), set(), [(B, False)]),
])
def test_creations(shown: set[Any], made: set[Any], seen: set[Any], expected: list[Any]) -> None:
    upkeep = owned_objects.Upkeep(made=set(made), seen=set(seen))
    todo = owned_objects.creations([POLICY, BUDGET], shown, upkeep)
    assert [((c.kind, c.name), c.recreated) for c in todo] == expected
    assert shown <= upkeep.seen


def test_a_recreated_object_is_announced_once_then_waits_for_the_index() -> None:
    upkeep = owned_objects.Upkeep(made={P}, seen={P})
    (todo,) = owned_objects.creations([POLICY], set(), upkeep)
    owned_objects.created(upkeep, todo)
    assert owned_objects.creations([POLICY], set(), upkeep) == []  # the index lags: no second create
    assert owned_objects.creations([POLICY], {P}, upkeep) == [] and P in upkeep.seen


def test_present_keeps_only_the_objects_of_this_job_uid() -> None:
    entries = [("NetworkPolicy", "job", "uid-new"), ("PodDisruptionBudget", "job-ps", "uid-old")]
    assert owned_objects.present(entries, "uid-new") == {P}


@pytest.mark.parametrize("references, uid", [
    ([], ""),
    ([{"uid": "a"}], ""),
    ([{"uid": "a"}, {"uid": "b", "controller": True}], "b"),
])
def test_owner_uid_is_the_controller_reference(references: list[Any], uid: str) -> None:
    assert owned_objects.owner_uid({"ownerReferences": references}) == uid
