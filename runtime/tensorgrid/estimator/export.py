"""``tf.estimator.export``: how a served model takes its input, and the outputs it offers.

``export_saved_model`` calls a ``serving_input_receiver_fn`` in the export graph: it makes the
placeholders a client feeds (``receiver_tensors``) and the features the model_fn reads from them.
``build_parsing_serving_input_receiver_fn`` takes serialized ``tf.train.Example``s (one string
placeholder, ``input_example_tensor``, parsed by a feature spec, as ``make_parse_example_spec``
gives it); ``build_raw_serving_input_receiver_fn`` takes the features themselves. The output
classes of ``export_output`` are re-exported here, where TensorFlow has them.

An exported TRAIN or EVAL graph takes labels too: its receiver fn returns a ``SupervisedInputReceiver``
(features, labels, and the tensors fed), as ``build_raw_supervised_input_receiver_fn`` makes one of
placeholders shaped like given features and labels (fed by their keys, a single labels tensor as
``label``), and ``build_supervised_input_receiver_fn_from_input_fn`` of placeholders shaped like
what a training ``input_fn`` returns.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Optional

from tensorgrid.data import dataset_ops
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
TrainOutput = export_output.TrainOutput
EvalOutput = export_output.EvalOutput
SINGLE_FEATURE_DEFAULT_NAME = "feature"
SINGLE_LABEL_DEFAULT_NAME = "label"
SINGLE_RECEIVER_DEFAULT_NAME = "input"


def _wrapped_and_checked(tensors: Any, what: str, default_name: str, allow_int_keys: bool = False) -> dict[Any, Any]:
    """A dict of tensors by name (a single tensor is named ``default_name``); ValueError naming
    a key that is not a string (nor an int, where allowed) or a value that is not a Tensor or SparseTensor."""
    if not isinstance(tensors, dict):
        tensors = {default_name: tensors}
    if not tensors:
        raise ValueError(f"{what}s must be defined.")
    for name, tensor in tensors.items():
        if not isinstance(name, str) and not (allow_int_keys and isinstance(name, int)):
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


class SupervisedInputReceiver(collections.namedtuple(
        "SupervisedInputReceiver", ["features", "labels", "receiver_tensors"])):
    """What the receiver fn of an exported TRAIN or EVAL graph returns: the model_fn's ``features`` and
    ``labels`` (each a tensor or a dict of them, kept as given) and the tensors a client feeds."""

    def __new__(cls, features: Any, labels: Any, receiver_tensors: Any) -> "SupervisedInputReceiver":
        _wrapped_and_checked(features, "feature", SINGLE_FEATURE_DEFAULT_NAME, allow_int_keys=True)
        _wrapped_and_checked(labels, "label", SINGLE_LABEL_DEFAULT_NAME, allow_int_keys=True)
        receiver_tensors = _wrapped_and_checked(receiver_tensors, "receiver_tensor", SINGLE_RECEIVER_DEFAULT_NAME)
        return super().__new__(cls, features, labels, receiver_tensors)


def _placeholder_like(tensor: Any, what: str, default_batch_size: Optional[int]) -> graph_lib.Tensor:
    """A placeholder of ``tensor``'s dtype and shape, its first dimension ``default_batch_size``, named as its op."""
    if not isinstance(tensor, graph_lib.Tensor):
        raise ValueError(f"{what} must be a dense Tensor to make a placeholder like it, got {tensor!r}")
    shape = tensor.get_shape()
    if shape.ndims is None or shape.ndims == 0:
        raise ValueError(f"{what} needs a known rank of at least 1 (a batch dimension), its shape is {shape}")
    dims = shape.as_list()
    dims[0] = default_batch_size
    return array_ops.placeholder(tensor.dtype, shape=tensor_shape.TensorShape(dims), name=tensor.op.name)


def build_raw_supervised_input_receiver_fn(
        features: Any, labels: Any, default_batch_size: Optional[int] = None) -> Callable[[], SupervisedInputReceiver]:
    """A receiver fn of placeholders like ``features`` and ``labels`` (each a tensor or a dict of them),
    fed by their keys (a single features tensor as ``input``, a single labels tensor as ``label``);
    ValueError when features and labels share a key."""
    feature_keys = list(features) if isinstance(features, dict) else [SINGLE_RECEIVER_DEFAULT_NAME]
    label_keys = list(labels) if isinstance(labels, dict) else [SINGLE_LABEL_DEFAULT_NAME]
    overlap = sorted(set(feature_keys) & set(label_keys), key=str)
    if overlap:
        raise ValueError(f"Features and labels must have distinct keys. Found overlapping keys: {overlap}")

    def placeholders(tensors: Any, what: str, single_key: str) -> tuple[Any, dict[str, Any]]:
        """Placeholders like ``tensors`` (as given: a dict or one tensor), and the same by receiver key."""
        if isinstance(tensors, dict):
            made = {key: _placeholder_like(tensor, f"{what} {key!r}", default_batch_size)
                    for key, tensor in tensors.items()}
            return made, dict(made)
        made_one = _placeholder_like(tensors, what, default_batch_size)
        return made_one, {single_key: made_one}

    def supervised_input_receiver_fn() -> SupervisedInputReceiver:
        receiver_features, feature_receivers = placeholders(features, "features", SINGLE_RECEIVER_DEFAULT_NAME)
        receiver_labels, label_receivers = placeholders(labels, "labels", SINGLE_LABEL_DEFAULT_NAME)
        return SupervisedInputReceiver(receiver_features, receiver_labels, {**feature_receivers, **label_receivers})

    return supervised_input_receiver_fn


def build_supervised_input_receiver_fn_from_input_fn(
        input_fn: Callable[..., Any], **input_fn_args: Any) -> Callable[[], SupervisedInputReceiver]:
    """A receiver fn of placeholders like the (features, labels) that ``input_fn(**input_fn_args)`` returns
    (directly or as a Dataset's elements); input_fn runs once, now, in a graph of its own."""
    with graph_lib.Graph().as_default():
        result = input_fn(**input_fn_args)
        if isinstance(result, dataset_ops.Dataset):
            result = dataset_ops.make_initializable_iterator(result).get_next()
        if not isinstance(result, (list, tuple)) or len(result) != 2:
            raise ValueError(f"input_fn should return (features, labels) (or a Dataset of them) to build a "
                             f"supervised receiver from, got {result!r}")
        features, labels = result
    return build_raw_supervised_input_receiver_fn(features, labels)
