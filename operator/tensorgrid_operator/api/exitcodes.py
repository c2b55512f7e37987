"""Which container exit codes are worth a retry under ``restartPolicy: ExitCode``.

The table (also in docs/operator.md) in one place, so the reconciler, the docs and
the tests cannot disagree:

- ``0``: success, never retried under ExitCode.
- ``1``-``127``: the program itself failed (1 general error, 2 usage error, 126 not
  executable, 127 command not found): permanent, a retry would fail the same way.
- ``128``: invalid argument to ``exit``: permanent.
- ``128+N`` for the signals a crashing program raises on itself (SIGILL 132,
  SIGTRAP 133, SIGABRT 134, SIGBUS 135, SIGFPE 136, SIGSEGV 139, SIGSYS 159): permanent,
  the same input crashes the same way again.
- any other ``128+N`` (SIGHUP 129, SIGINT 130, SIGKILL 137 -- the OOM killer and
  evictions --, SIGUSR1 138, SIGUSR2 140, SIGPIPE 141, SIGALRM 142, SIGTERM 143 --
  node drains and preemption --, and so on up to 255): retryable, something outside
  the program stopped it.
- a failed pod with no exit code at all (evicted, node lost, rejected at admission):
  retryable, for the same reason.

Kubeflow's TFJob retries every code >= 128; crash signals are permanent here so a
deterministic segfault does not burn the whole backoff budget.
"""

from __future__ import annotations

import enum
from typing import Optional

SIGNAL_BASE = 128
# 128 + signal number of the signals a program raises on itself when it crashes.
CRASH_SIGNAL_CODES = frozenset({128 + 4, 128 + 5, 128 + 6, 128 + 7, 128 + 8, 128 + 11, 128 + 31})


class ExitClass(str, enum.Enum):
    SUCCEEDED = "Succeeded"
    RETRYABLE = "Retryable"
    PERMANENT = "Permanent"


def classify(exit_code: Optional[int]) -> ExitClass:
    """The ExitCode policy's verdict on how a container ended (``None``: no exit code known)."""
    if exit_code is None:
        return ExitClass.RETRYABLE
    if exit_code == 0:
        return ExitClass.SUCCEEDED
    if exit_code <= SIGNAL_BASE or exit_code in CRASH_SIGNAL_CODES or exit_code > 255:
        return ExitClass.PERMANENT
    return ExitClass.RETRYABLE
