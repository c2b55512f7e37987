"""``tf.summary``: summary ops and the event-file writer TensorBoard reads."""

from __future__ import annotations

from tensorgrid.ops.summary_ops import audio, histogram, image, merge, merge_all, scalar, tensor_summary, text
from tensorgrid.summary.event_file import FileWriter, FileWriterCache

__all__ = ["FileWriter", "FileWriterCache", "audio", "histogram", "image", "merge", "merge_all", "scalar", "tensor_summary",
           "text"]
