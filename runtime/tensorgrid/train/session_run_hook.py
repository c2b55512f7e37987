"""The hook protocol of MonitoredSession (``tf.train.SessionRunHook`` and its arguments).

A hook sees the session being created, adds fetches and feeds to every ``run``,
reads their values afterwards, and can ask the loop to stop.
"""

from __future__ import annotations

import collections
from typing import Any, Optional


class SessionRunHook:
    """Base class: override the callbacks you need; each does nothing by default."""

    def begin(self) -> None:
        """Called once before the graph is finalized; may add ops."""

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Called when a session is created (and again after a recovery)."""

    def before_run(self, run_context: "SessionRunContext") -> Optional["SessionRunArgs"]:
        """Returns extra fetches/feeds for the coming ``run``, or None."""
        return None

    def after_run(self, run_context: "SessionRunContext", run_values: "SessionRunValues") -> None:
        """Receives the values of what ``before_run`` asked for."""

    def end(self, session: Any) -> None:
        """Called when the monitored session closes normally."""


class SessionRunArgs(collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    """What a hook adds to a run: fetches (any nested structure), feeds, run options."""

    def __new__(cls, fetches: Any, feed_dict: Any = None, options: Any = None) -> "SessionRunArgs":
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The run being made, the session making it, and a way to ask the loop to stop."""

    def __init__(self, original_args: SessionRunArgs, session: Any) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        return self._original_args

    @property
    def session(self) -> Any:
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        self._stop_requested = True


class SessionRunValues(collections.namedtuple("SessionRunValues", ["results", "options", "run_metadata"])):
    """The values of a hook's fetches after a run."""
