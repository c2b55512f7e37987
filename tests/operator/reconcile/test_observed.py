"""When kopf's indexes may be trusted: once they show the operator's own last writes (no cluster)."""

from __future__ import annotations

from typing import Any

from tensorgrid_operator.reconcile import observed


def pod(name: str, uid: str, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid}
    if terminating:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"metadata": meta}


def service(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def test_nothing_expected_is_caught_up() -> None:
    assert observed.caught_up(None, [], [])
    assert observed.caught_up(observed.Expectations(), [pod("a", "1")], [])


def test_created_objects_must_show() -> None:
    expected = observed.Expectations(pods=frozenset({"j-ps-0"}), services=frozenset({"j-ps-0"}))
    assert not observed.caught_up(expected, [], [service("j-ps-0")])
    assert not observed.caught_up(expected, [pod("j-ps-0", "1")], [])
    assert observed.caught_up(expected, [pod("j-ps-0", "1")], [service("j-ps-0")])


def test_deleted_pods_must_be_gone_or_terminating_and_deleted_services_gone() -> None:
    expected = observed.Expectations(deleted_pods=frozenset({"uid-1"}), deleted_services=frozenset({"old"}))
    assert not observed.caught_up(expected, [pod("j-worker-0", "uid-1")], [])
    assert observed.caught_up(expected, [pod("j-worker-0", "uid-1", terminating=True)], [])
    assert observed.caught_up(expected, [pod("j-worker-0", "uid-2")], [])  # its replacement
    assert not observed.caught_up(expected, [], [service("old")])


def test_expectations_add_up_until_caught_up() -> None:
    first = observed.Expectations(pods=frozenset({"a"}))
    both = observed.Expectations(pods=frozenset({"b"}), deleted_pods=frozenset({"u"})).merged(first)
    assert both == observed.Expectations(pods=frozenset({"a", "b"}), deleted_pods=frozenset({"u"}))
    assert not observed.caught_up(both, [pod("b", "1")], [])
