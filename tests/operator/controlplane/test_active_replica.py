"""``tensorgrid_operator_active`` says which operator replica kopf peering lets act: the keep-alives
kopf itself writes into a peering object on a real API server, read by ``controller.activity``.

Two kopf operators with no handlers (so they reconcile nothing of the other tests) share a
ClusterKopfPeering of this test's own; the gauge follows the first one's activity as the second,
of higher priority, starts and stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import pathlib
import threading
import typing
import uuid
from typing import Any, Iterator

import kopf
import pytest

from kube_controlplane import wait_crds_established
from operator_cluster import ControlPlane, operator_settings, wait_for
from tensorgrid_operator import metrics
from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator import config
from tensorgrid_operator.controller import activity
from tensorgrid_operator.controller import registrations
from tensorgrid_operator.controller import state as state_lib

pytestmark = pytest.mark.controlplane

ROOT = pathlib.Path(__file__).resolve().parents[3]

NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


def _keepalive(priority: int, seconds_ago: float, lifetime: int = 60) -> dict[str, Any]:
    return {"priority": priority, "lifetime": lifetime,
            "lastseen": (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat()}


@pytest.mark.parametrize("others, active", [
    ({}, True),
    ({"b": _keepalive(5, 1)}, True),  # a lower priority
    ({"b": _keepalive(20, 1)}, False),  # a higher one, alive
    ({"b": _keepalive(10, 1)}, False),  # an equal one pauses both, as kopf does
    ({"b": _keepalive(20, 61)}, True),  # a higher one whose keep-alive expired
])
def test_the_peer_rule(others: dict[str, Any], active: bool) -> None:
    status = {"me": _keepalive(10, 0), **others}
    assert activity.active_among_peers([status], "me", 10, NOW) is active


def test_no_peering_object_means_paused() -> None:
    assert not activity.active_among_peers([None], "me", 10, NOW)


@contextlib.contextmanager
def _kopf_peer(settings: config.Settings, identity: str, priority: int) -> Iterator[None]:
    """A kopf operator with no handlers but the operator's login, taking part in the peering of
    ``settings``, until the block ends."""
    stop, ready = threading.Event(), threading.Event()
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(registrations.login)

    def operate() -> None:
        asyncio.run(kopf.operator(registry=registry, clusterwide=True, peering_name=settings.peering,
                                  priority=priority, identity=typing.cast(Any, identity),
                                  memo=state_lib.memo_for(settings), stop_flag=stop, ready_flag=ready))

    thread = threading.Thread(target=operate, name=f"kopf peer {identity}", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), f"kopf peer {identity} did not start"
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def test_the_gauge_follows_kopf_peering(controlplane: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> None:
    controlplane.kubectl("apply", "-f", str(ROOT / "crds" / "kopf-peering.yaml"))
    wait_crds_established(controlplane, "clusterkopfpeerings.kopf.dev")
    name = f"tg-active-{uuid.uuid4().hex[:8]}"
    controlplane.kubectl("apply", "-f", "-",
                         stdin=f"apiVersion: kopf.dev/v1\nkind: ClusterKopfPeering\nmetadata:\n  name: {name}\n")
    settings = dataclasses.replace(operator_settings(controlplane, ()), peering=name)
    operator = running_operator.RunningOperator(
        settings=settings, kube=kube.Kube(kube.load_config(settings.kubeconfig), pool_size=2),
        executor=concurrent.futures.ThreadPoolExecutor(2), deciders=concurrent.futures.ThreadPoolExecutor(1))
    watching = threading.Event()

    async def watch_while_watching() -> None:
        watch = asyncio.create_task(activity.watch_activity(operator, "first", 10, interval=0.2))
        while watching.is_set():
            await asyncio.sleep(0.05)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch

    watching.set()
    watcher = threading.Thread(target=asyncio.run, args=(watch_while_watching(),), daemon=True)
    watcher.start()

    def active() -> float:
        return float(metrics.REGISTRY.get_sample_value("tensorgrid_operator_active") or 0.0)

    try:
        with _kopf_peer(settings, "first", 10):
            wait_for(lambda: active() == 1.0, 30, "the only peer to be active")
            with _kopf_peer(settings, "second", 20):
                wait_for(lambda: active() == 0.0, 30, "the first peer to stand by for the higher priority")
            wait_for(lambda: active() == 1.0, 30, "the first peer to act again once the second stopped")
    finally:
        watching.clear()
        watcher.join(timeout=10)
        operator.executor.shutdown()
        operator.deciders.shutdown()
        operator.kube.close()
        controlplane.kubectl("delete", "clusterkopfpeering", name, "--ignore-not-found")
