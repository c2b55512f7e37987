"""How long the operator's event loop is busy: a task that sleeps a fixed interval and records how late it woke.

Everything the operator does that is not a thread's work (kopf's watches, the /healthz
endpoint the liveness probe reads, every job's loop) waits while the loop runs one
piece of code; a reconcile that ran on the loop for seconds stalled them all. This
measures it, as ``tensorgrid_operator_event_loop_lag_seconds`` (and its maximum), so
the scale benchmark and a dashboard can see it.
"""

from __future__ import annotations

import asyncio
import time

from tensorgrid_operator import metrics

# How often the loop is probed; the lag is what a sleep of this long overran by.
PROBE_INTERVAL_SECONDS = 0.1


async def watch_lag(interval: float = PROBE_INTERVAL_SECONDS) -> None:
    """Record the loop's lag every ``interval`` seconds until cancelled."""
    worst = 0.0
    while True:
        started = time.monotonic()
        await asyncio.sleep(interval)
        lag = max(0.0, time.monotonic() - started - interval)
        metrics.EVENT_LOOP_LAG.observe(lag)
        if lag > worst:
            worst = lag
            metrics.EVENT_LOOP_LAG_MAX.set(worst)
