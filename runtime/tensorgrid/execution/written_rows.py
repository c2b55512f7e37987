"""Which rows of a variable were written since a given moment: what an incremental checkpoint saves.

Every write to a variable bumps its version. A kernel that writes only some rows (a scatter, a
sparse optimizer update) reports them (``wrote_rows``); every other write is a write of the whole
variable (``wrote_whole``), and the executor records one for each variable a kernel received by
reference unless that kernel is declared to report its rows (``kernels/row_writes.py``). So a
write nobody described is never missed: it makes the variable count as written whole.

The answer to "what changed since version v" is exact and needs no reset, so several readers
(savers) can each keep their own baseline. Rows are tracked (8 bytes a row) only from the first
question on; before that, and for a baseline of another incarnation of the variable (the task
restarted, the container was cleared), the answer is "all of it".
"""

from __future__ import annotations

import secrets
import threading
from typing import Any, Optional

import numpy as np

class WrittenRows:
    """The write versions of one variable, as a whole and row by row."""

    def __init__(self) -> None:
        self.incarnation = secrets.randbits(62) + 1
        """Random per variable object, never 0: a baseline taken from another object is refused."""
        self._lock = threading.Lock()
        self._version = 0
        self._whole_version = 0
        self._row_versions: Optional[np.ndarray] = None
        self._tracked_from = 0

    def wrote_whole(self) -> None:
        """Records a write of (possibly) every element; called after the write."""
        with self._lock:
            self._version += 1
            self._whole_version = self._version

    def wrote_rows(self, rows: Any) -> None:
        """Records a write of the rows ``rows`` (host int array, first dimension); called after the write."""
        with self._lock:
            self._version += 1
            if self._row_versions is not None:
                self._row_versions[rows] = self._version

    def changed_since(self, incarnation: int, version: int, num_rows: int) -> tuple[tuple[int, int], Optional[np.ndarray]]:
        """``((incarnation, version now), rows written after ``version``)``; rows are None when the
        whole variable must be taken (written whole, not tracked then, or another incarnation).

        Read the variable's values after this call: a write that ends later has a newer version,
        so the next question with the returned baseline includes it.
        """
        with self._lock:
            now = self._version
            token = (self.incarnation, now)
            if self._row_versions is None or self._row_versions.shape[0] != num_rows:
                self._row_versions = np.zeros(num_rows, dtype=np.int64)
                self._tracked_from = now
                return token, None
            if (incarnation != self.incarnation or version < self._tracked_from or version > now
                    or self._whole_version > version):
                return token, None
            return token, np.flatnonzero(self._row_versions > version)
