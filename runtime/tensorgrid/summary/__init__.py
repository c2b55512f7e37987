"""``tf.summary``: summary ops and the event-file writer TensorBoard reads."""

from __future__ import annotations

from tensorgrid.ops.summary_ops import histogram, merge, merge_all, scalar
from tensorgrid.summary.event_file import FileWriter

__all__ = ["FileWriter", "histogram", "merge", "merge_all", "scalar"]
