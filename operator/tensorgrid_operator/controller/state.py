"""An operator's state: one :class:`OperatorState` in kopf's memo, handed to every handler.

Its settings, the running operator (API client, thread pools, per-job bookkeeping;
``cluster.running_operator``) and its /metrics server live here, from startup to
cleanup: nothing lives in module globals, so two operators can run in one process (the
tests do) without sharing anything but the Prometheus registry.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import kopf

from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator import config
from tensorgrid_operator import metrics

# The key of the OperatorState in kopf's memo.
MEMO_KEY = "tensorgrid"


@dataclasses.dataclass
class OperatorState:
    """One operator: its settings, and what it holds while it runs."""

    settings: config.Settings
    running: Optional[running_operator.RunningOperator] = None
    """The API client, thread pool and per-job state, from startup to cleanup."""
    metrics_server: Optional[metrics.MetricsServer] = None
    """The /metrics endpoint, from startup to cleanup (none with ``metrics_port=None``)."""
    peer_identity: Optional[str] = None
    """The identity this operator gives kopf peering (``registrations.run``); ``None`` when kopf chose it."""
    peer_priority: Optional[int] = None
    """Its peering priority (``registrations.run``); ``None`` when kopf chose it."""

    @property
    def metrics_port(self) -> Optional[int]:
        """The port /metrics is served on, once the operator started."""
        return self.metrics_server.port if self.metrics_server is not None else None


def memo_for(settings: config.Settings) -> kopf.Memo:
    """kopf's memo for an operator with these settings (``kopf.run(memo=...)``, ``kopf.operator(memo=...)``)."""
    return kopf.Memo({MEMO_KEY: OperatorState(settings)})


def state_of(memo: Any) -> OperatorState:
    """The OperatorState in a kopf memo; an operator started without one (``kopf run -m
    tensorgrid_operator.controller.registrations``) gets one with the default settings."""
    state = memo.get(MEMO_KEY)
    if state is None:
        state = memo[MEMO_KEY] = OperatorState(config.Settings())
    if not isinstance(state, OperatorState):
        raise TypeError(f"kopf's memo[{MEMO_KEY!r}] is a {type(state).__name__}, not the OperatorState "
                        f"that memo_for makes")
    return state


def operator_of(memo: Any) -> running_operator.RunningOperator:
    """The running operator in a kopf memo's state, once the operator has started."""
    operator = state_of(memo).running
    if operator is None:
        raise RuntimeError("the operator has not started")
    return operator
