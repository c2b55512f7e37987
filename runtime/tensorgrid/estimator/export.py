"""``tf.estimator.export``: how a served model takes its input, and the outputs it offers.

``export_saved_model`` calls a ``serving_input_receiver_fn`` in the export graph: it makes the
placeholders a client feeds (``receiver_tensors``) and the features the model_fn reads from them.
``build_parsing_serving_input_receiver_fn`` takes serialized ``tf.train.Example``s (one string
placeholder, ``input_example_tensor``, parsed by a feature spec, as ``make_parse_example_spec``
gives it); ``build_raw_serving_input_receiver_fn`` takes the features themselves. The output
classes of ``export_output`` are re-exported here, where TensorFlow has them.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Optional

from tensorgrid.estimator import export_output
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import parsing_ops

ExportOutput = export_output.ExportOutput
ClassificationOutput = export_output.ClassificationOutput
PredictOutput = export_output.PredictOutput
RegressionOutput = export_output.RegressionOutput
SINGLE_FEATURE_DEFAULT_NAME = "feature"
SINGLE_RECEIVER_DEFAULT_NAME = "input"


def _wrapped_and_checked(tensors: Any, what: str, default_name: str) -> dict[str, Any]:
    """A dict of tensors by name (a single tensor is named ``default_name``); ValueError naming
    a key that is not a string or a value that is not a Tensor or SparseTensor."""
    if not isinstance(tensors, dict):
        tensors = {default_name: tensors}
    if not tensors:
        raise ValueError(f"{what}s must be defined.")
    for name, tensor in tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"{what} keys must be strings: {name!r}.")
        if not isinstance(tensor, (graph_lib.Tensor, sparse_tensor.SparseTensor)):
            raise ValueError(f"{what} {name} must be a Tensor or SparseTensor, got {tensor!r}.")
    return dict(tensors)


class ServingInputReceiver(collections.namedtuple(
        "ServingInputReceiver", ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """What a ``serving_input_receiver_fn`` returns: the model_fn's ``features`` and the tensors a
    client feeds (``receiver_tensors``, a single one named ``input``), plus alternative receivers
    by name (each its own signatures, ``<name>:<output key>``)."""

    def __new__(cls, features: Any, receiver_tensors: Any,
                receiver_tensors_alternatives: Optional[dict[str, Any]] = None) -> "ServingInputReceiver":
        features = _wrapped_and_checked(features, "feature", SINGLE_FEATURE_DEFAULT_NAME)
        receiver_tensors = _wrapped_and_checked(receiver_tensors, "receiver_tensor", SINGLE_RECEIVER_DEFAULT_NAME)
        alternatives = None
        if receiver_tensors_alternatives is not None:
            if not isinstance(receiver_tensors_alternatives, dict):
                raise ValueError("receiver_tensors_alternatives must be a dict: "
                                 f"{receiver_tensors_alternatives!r}.")
            alternatives = {name: _wrapped_and_checked(tensors, "receiver_tensors_alternative",
                                                       SINGLE_RECEIVER_DEFAULT_NAME)
                            for name, tensors in receiver_tensors_alternatives.items()}
        return super().__new__(cls, features, receiver_tensors, alternatives)


def build_parsing_serving_input_receiver_fn(
        feature_spec: dict[str, Any], default_batch_size: Optional[int] = None) -> Callable[[], ServingInputReceiver]:
    """A receiver fn taking a batch of serialized ``tf.train.Example``s (``examples``), parsed by ``feature_spec``."""
    if not isinstance(feature_spec, dict) or not feature_spec:
        raise ValueError(f"feature_spec must be a non-empty dict of feature names to parsing specs, "
                         f"got {feature_spec!r}")

    def serving_input_receiver_fn() -> ServingInputReceiver:
        serialized = array_ops.placeholder(dtypes.string, shape=[default_batch_size], name="input_example_tensor")
        features = parsing_ops.parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})

    return serving_input_receiver_fn


def build_raw_serving_input_receiver_fn(
        features: dict[str, Any], default_batch_size: Optional[int] = None) -> Callable[[], ServingInputReceiver]:
    """A receiver fn taking the features themselves: a placeholder per tensor of ``features`` (its
    dtype, its shape with the batch dimension ``default_batch_size``), fed by its name."""
    if not isinstance(features, dict) or not features:
        raise ValueError(f"features must be a non-empty dict of feature names to tensors, got {features!r}")
    for name, tensor in features.items():
        if not isinstance(tensor, graph_lib.Tensor):
            raise ValueError(f"build_raw_serving_input_receiver_fn takes dense tensors: feature {name!r} is "
                             f"{tensor!r}")
        if tensor.get_shape().ndims is None or tensor.get_shape().ndims == 0:
            raise ValueError(f"feature {name!r} needs a known rank of at least 1 (a batch dimension), its shape "
                             f"is {tensor.get_shape()}")

    def serving_input_receiver_fn() -> ServingInputReceiver:
        receiver_tensors = {}
        for name, tensor in features.items():
            shape = tensor.get_shape().as_list()
            shape[0] = default_batch_size
            receiver_tensors[name] = array_ops.placeholder(tensor.dtype, shape=tensor_shape.TensorShape(shape),
                                                           name=tensor.op.name)
        return ServingInputReceiver(receiver_tensors, dict(receiver_tensors))

    return serving_input_receiver_fn
