"""kopf's index readiness lets go of the watchers and workers kopf stops (controller/index_readiness.py).

Without it, a namespace deleted while the operator started left the readiness of its stopped
watchers off for good, and the operator never acted on a job again (a fresh operator and a job in
a new namespace: no pods within 140 s in 2 of 12 tries on the test control plane; 0 of 16 with it).
Needs no cluster: kopf's own toggles and tasks.
"""

from __future__ import annotations

import asyncio
import logging

from kopf._cogs.aiokits import aiotoggles
from kopf._core.reactor import queueing

from tensorgrid_operator.controller import index_readiness


def test_a_watcher_cancelled_before_its_first_listing_no_longer_holds_the_operator() -> None:
    async def scenario() -> tuple[bool, bool]:
        readiness = aiotoggles.ToggleSet(all)
        never_listed = await readiness.make_toggle(name="pods.v1@a-namespace-being-deleted")

        async def watcher_that_never_lists(**_: object) -> None:
            await asyncio.Event().wait()

        wrapped = index_readiness._dropping_its_toggle(watcher_that_never_lists)
        task = asyncio.create_task(wrapped(operator_indexed=readiness, resource_indexed=never_listed))
        await asyncio.sleep(0)
        held = readiness.is_on()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.wait_for(readiness.wait_for(True), timeout=5)
        return held, readiness.is_on()

    held, released = asyncio.run(scenario())
    assert not held and released


def test_it_wraps_kopfs_watcher_and_worker_once() -> None:
    logger = logging.getLogger("test")
    assert index_readiness.install(logger) and index_readiness.install(logger)
    for fn in (queueing.watcher, queueing.worker):
        assert getattr(fn, index_readiness._WRAPPED)
        assert not getattr(fn.__wrapped__, index_readiness._WRAPPED, False), "wrapped twice"
