"""``tf.summary.scalar``, ``histogram``, ``image``, ``audio``, ``text``, ``tensor_summary``, ``merge`` and
``merge_all``: ops whose value is a serialized ``Summary`` protocol buffer, for
``tf.summary.FileWriter`` to write.

Each summary op is added to the ``summaries`` collection (``merge_all`` merges them);
its tag is its name prefixed by the enclosing name scopes, as in TF1.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import op_util

for _op_type in ("ScalarSummary", "HistogramSummary", "ImageSummary", "AudioSummaryV2", "TextSummary", "TensorSummaryV2",
                 "MergeSummary"):
    op_registry.register_op(_op_type)
    op_registry.NotDifferentiable(_op_type)

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w.]")


def _clean_tag(name: str) -> str:
    """``name`` as a valid tag and scope name, as TF1's summaries make it: each character other than
    a word character, ``-``, ``/`` and ``.`` becomes ``_`` and leading slashes go (``var.name``,
    ``"W1:0"``, gives ``"W1_0"``)."""
    cleaned = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if cleaned != name:
        logging.getLogger(__name__).info("Summary name %s is illegal; using %s instead.", name, cleaned)
    return cleaned


def _scoped_summary(op_type: str, t: graph_lib.Tensor, name: str, family: Optional[str],
                    collections: Optional[Sequence[str]], extra_inputs: Sequence[Any] = (),
                    attrs: Optional[dict[str, Any]] = None) -> graph_lib.Tensor:
    """The summary op, named by a new name scope as TF1's ``summary_scope`` does: the tag is
    that scope's unique name (``family/`` in front of it when given)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"A summary needs a non-empty name, got {name!r}")
    graph = t.graph
    name = _clean_tag(name)
    family = _clean_tag(family) if family else family
    with graph.name_scope(f"{family}/{name}" if family else name) as scope:
        tag = f"{family}/{scope.rstrip('/')}" if family else scope.rstrip("/")
        inputs = [t] + [op_util.to_tensor(value, dtypes.float32) for value in extra_inputs]
        summary = op_util.make_tensor(op_type, inputs, dtypes.string, [], scope, {"tag": tag, **(attrs or {})})
    for key in (graph_lib.GraphKeys.SUMMARIES,) if collections is None else collections:
        graph.add_to_collection(key, summary)
    return summary


def scalar(name: str, tensor: Any, collections: Optional[Sequence[str]] = None,
           family: Optional[str] = None) -> graph_lib.Tensor:
    """A summary holding one real number (``simple_value``)."""
    t = op_util.to_tensor(tensor)
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"tf.summary.scalar needs a scalar, got {t.name} of shape {t.shape}")
    op_util.check_dtype_in("ScalarSummary", t, op_util.NUMBERS)
    return _scoped_summary("ScalarSummary", t, name, family, collections)


def histogram(name: str, values: Any, collections: Optional[Sequence[str]] = None,
              family: Optional[str] = None) -> graph_lib.Tensor:
    """A summary holding a histogram of ``values`` (TensorFlow's buckets)."""
    t = op_util.to_tensor(values)
    op_util.check_dtype_in("HistogramSummary", t, op_util.NUMBERS)
    return _scoped_summary("HistogramSummary", t, name, family, collections)


def _max_outputs(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_outputs must be a positive integer, got {value!r}")
    return value


def image(name: str, tensor: Any, max_outputs: int = 3, collections: Optional[Sequence[str]] = None,
          family: Optional[str] = None) -> graph_lib.Tensor:
    """A summary of up to ``max_outputs`` images of a [batch, height, width, channels]
    tensor (1, 3 or 4 channels; uint8, or floats scaled as TensorFlow does), as PNG."""
    t = op_util.to_tensor(tensor)
    op_util.check_dtype_in("ImageSummary", t, (dtypes.uint8,) + op_util.FLOATS)
    if t.shape.ndims is not None and (t.shape.ndims != 4 or t.shape.as_list()[-1] not in (None, 1, 3, 4)):
        raise ValueError(f"tf.summary.image needs a 4-D [batch, height, width, channels] tensor with 1, 3 or 4 "
                         f"channels, got {t.name} of shape {t.shape}")
    return _scoped_summary("ImageSummary", t, name, family, collections, attrs={"max_images": _max_outputs(max_outputs)})


def audio(name: str, tensor: Any, sample_rate: Any, max_outputs: int = 3,
          collections: Optional[Sequence[str]] = None, family: Optional[str] = None) -> graph_lib.Tensor:
    """A summary of up to ``max_outputs`` clips of a [batch, frames, channels] or
    [batch, frames] float tensor of samples in [-1, 1], as 16-bit WAV."""
    t = op_util.to_tensor(tensor)
    op_util.check_dtype_in("AudioSummaryV2", t, (dtypes.float32,))
    if t.shape.ndims not in (None, 2, 3):
        raise ValueError(f"tf.summary.audio needs a [batch, frames, channels] or [batch, frames] tensor, got {t.name} "
                         f"of shape {t.shape}")
    return _scoped_summary("AudioSummaryV2", t, name, family, collections, extra_inputs=[sample_rate],
                           attrs={"max_outputs": _max_outputs(max_outputs)})


def text(name: str, tensor: Any, collections: Optional[Sequence[str]] = None) -> graph_lib.Tensor:
    """A summary of a string tensor of any shape, shown by TensorBoard's text plugin."""
    t = op_util.to_tensor(tensor)
    if t.dtype.base_dtype != dtypes.string:
        raise ValueError(f"tf.summary.text needs a string tensor, got {t.name} of dtype {t.dtype.name}")
    return _scoped_summary("TextSummary", t, name, None, collections)


def tensor_summary(name: str, tensor: Any, summary_description: Optional[str] = None,
                   collections: Optional[Sequence[str]] = None, summary_metadata: Any = None,
                   family: Optional[str] = None, display_name: Optional[str] = None) -> graph_lib.Tensor:
    """A summary holding the whole ``tensor`` (a TensorProto, any dtype and shape) and its
    ``SummaryMetadata``: ``summary_metadata`` (a message with ``SerializeToString``, or its bytes)
    with ``display_name`` and ``summary_description`` set over it when given, as TF1's."""
    t = op_util.to_tensor(tensor)
    if summary_metadata is None:
        metadata = b""
    elif isinstance(summary_metadata, bytes):
        metadata = summary_metadata
    elif callable(getattr(summary_metadata, "SerializeToString", None)):
        metadata = bytes(summary_metadata.SerializeToString())
    else:
        raise TypeError(f"summary_metadata must be a SummaryMetadata message or its serialized bytes, got "
                        f"{summary_metadata!r}")
    for label, text_value in (("summary_description", summary_description), ("display_name", display_name)):
        if text_value is not None and not isinstance(text_value, str):
            raise TypeError(f"{label} must be a string, got {text_value!r}")
    return _scoped_summary("TensorSummaryV2", t, name, family, collections, attrs={
        "metadata": metadata, "display_name": display_name or "", "summary_description": summary_description or ""})


def merge(inputs: Sequence[Any], collections: Optional[Sequence[str]] = None,
          name: Optional[str] = None) -> graph_lib.Tensor:
    """One summary holding the values of all ``inputs`` (a repeated tag fails the step)."""
    tensors = [op_util.to_tensor(t) for t in inputs]
    for t in tensors:
        if t.dtype.base_dtype != dtypes.string:
            raise TypeError(f"tf.summary.merge takes summary (string) tensors, got {t.name} of dtype {t.dtype.name}")
    summary = op_util.make_tensor("MergeSummary", tensors, dtypes.string, [], name or "Merge/MergeSummary")
    for key in collections or []:
        summary.graph.add_to_collection(key, summary)
    return summary


def merge_all(key: str = graph_lib.GraphKeys.SUMMARIES, scope: Optional[str] = None,
              name: Optional[str] = None) -> Optional[graph_lib.Tensor]:
    """The merge of every summary in the ``key`` collection, or None when it is empty."""
    summaries = graph_lib.get_default_graph().get_collection(key, scope)
    return merge(summaries, name=name) if summaries else None
