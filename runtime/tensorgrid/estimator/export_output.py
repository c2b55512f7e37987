"""``tf.estimator.export``'s outputs: what a PREDICT ``EstimatorSpec`` offers a served model, by signature,
and what an exported TRAIN or EVAL graph offers.

A model_fn's ``export_outputs`` maps signature keys to ``PredictOutput`` (any named tensors),
``ClassificationOutput`` (scores and class names of one serialized ``tf.train.Example`` input)
or ``RegressionOutput`` (one value per example of that input); each becomes a ``SignatureDef``
over the serving input receiver's tensors when ``export_saved_model`` writes the model. The
rules (which signatures need a single string input, the default key) are TensorFlow's.
``TrainOutput`` and ``EvalOutput`` are the one signature of an exported TRAIN or EVAL graph: its
loss, predictions and metrics, named as TensorFlow names them (``loss``, ``predictions/<key>``,
``metrics/<name>/value`` and ``metrics/<name>/update_op``).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import constant_op
from tensorgrid.train import saved_model_io

log = logging.getLogger("tensorgrid.estimator")
DEFAULT_SERVING_KEY = saved_model_io.DEFAULT_SERVING_SIGNATURE_DEF_KEY


class ExportOutput:
    """One signature of an exported model (``tf.estimator.export.ExportOutput``)."""

    def as_signature_def(self, receiver_tensors: Any) -> saved_model_io.SignatureDef:
        raise NotImplementedError


def _single_string_input(receiver_tensors: Any, what: str) -> graph_lib.Tensor:
    """The one string tensor a classify or regress signature reads (serialized tf.Examples)."""
    if not isinstance(receiver_tensors, dict):
        receiver_tensors = {"input": receiver_tensors}
    if len(receiver_tensors) != 1:
        raise ValueError(f"{what} input must be a single string Tensor; got {receiver_tensors}")
    (examples,) = receiver_tensors.values()
    if not isinstance(examples, graph_lib.Tensor) or examples.dtype != dtypes.string:
        raise ValueError(f"{what} input must be a single string Tensor; got {receiver_tensors}")
    return examples


class ClassificationOutput(ExportOutput):
    """Per example, class ``scores`` (float32) and/or class names ``classes`` (string)."""

    def __init__(self, scores: Optional[graph_lib.Tensor] = None, classes: Optional[graph_lib.Tensor] = None) -> None:
        if scores is not None and not (isinstance(scores, graph_lib.Tensor) and scores.dtype == dtypes.float32):
            raise ValueError(f"Classification scores must be a float32 Tensor; got {scores}")
        if classes is not None and not (isinstance(classes, graph_lib.Tensor) and classes.dtype == dtypes.string):
            raise ValueError(f"Classification classes must be a string Tensor; got {classes}")
        if scores is None and classes is None:
            raise ValueError("Cannot create a ClassificationOutput with empty arguments. At least one of "
                             "`scores` and `classes` must be defined.")
        self.scores = scores
        self.classes = classes

    def as_signature_def(self, receiver_tensors: Any) -> saved_model_io.SignatureDef:
        examples = _single_string_input(receiver_tensors, "Classification")
        outputs = {key: saved_model_io.tensor_info(tensor)
                   for key, tensor in (("classes", self.classes), ("scores", self.scores)) if tensor is not None}
        return saved_model_io.SignatureDef({"inputs": saved_model_io.tensor_info(examples)}, outputs,
                                           saved_model_io.CLASSIFY_METHOD_NAME)


class RegressionOutput(ExportOutput):
    """Per example, one float32 ``value``."""

    def __init__(self, value: graph_lib.Tensor) -> None:
        if not (isinstance(value, graph_lib.Tensor) and value.dtype == dtypes.float32):
            raise ValueError(f"Regression output value must be a float32 Tensor; got {value}")
        self.value = value

    def as_signature_def(self, receiver_tensors: Any) -> saved_model_io.SignatureDef:
        examples = _single_string_input(receiver_tensors, "Regression")
        return saved_model_io.SignatureDef({"inputs": saved_model_io.tensor_info(examples)},
                                           {"outputs": saved_model_io.tensor_info(self.value)},
                                           saved_model_io.REGRESS_METHOD_NAME)


class PredictOutput(ExportOutput):
    """Any named tensors (a single tensor is named ``output``), over any receiver tensors."""

    SINGLE_OUTPUT_DEFAULT_NAME = "output"

    def __init__(self, outputs: Any) -> None:
        if not isinstance(outputs, dict):
            outputs = {self.SINGLE_OUTPUT_DEFAULT_NAME: outputs}
        for key, tensor in outputs.items():
            if not isinstance(key, str):
                raise ValueError(f"Prediction output key must be a string; got {key}.")
            if not isinstance(tensor, graph_lib.Tensor):
                raise ValueError(f"Prediction output value must be a Tensor; got {tensor}.")
        self.outputs = dict(outputs)

    def as_signature_def(self, receiver_tensors: Any) -> saved_model_io.SignatureDef:
        if not isinstance(receiver_tensors, dict):
            receiver_tensors = {"input": receiver_tensors}
        return saved_model_io.SignatureDef(
            {key: saved_model_io.tensor_info(tensor) for key, tensor in receiver_tensors.items()},
            {key: saved_model_io.tensor_info(tensor) for key, tensor in self.outputs.items()},
            saved_model_io.PREDICT_METHOD_NAME)


class _SupervisedOutput(ExportOutput):
    """The loss, predictions and metrics of a TRAIN or EVAL graph, as one signature's outputs: a single
    loss or prediction tensor is named ``loss`` or ``predictions``, a dict's keys are prefixed with
    ``loss/`` or ``predictions/`` (unless they start with that name already); each metric's
    ``(value, update_op)`` gives ``metrics/<name>/value`` and ``metrics/<name>/update_op`` (an
    update Operation is fetched through an empty constant that depends on it, as in TensorFlow)."""

    METHOD_NAME = ""

    def __init__(self, loss: Any = None, predictions: Any = None, metrics: Any = None) -> None:
        self.loss = _prefixed(_named_tensors(loss, "loss"), "loss") if loss is not None else {}
        self.predictions = (_prefixed(_named_tensors(predictions, "predictions"), "predictions")
                            if predictions is not None else {})
        self.metrics = _metric_outputs(metrics) if metrics is not None else {}

    def as_signature_def(self, receiver_tensors: Any) -> saved_model_io.SignatureDef:
        if not isinstance(receiver_tensors, dict):
            receiver_tensors = {"input": receiver_tensors}
        if not receiver_tensors:
            raise ValueError(f"{self.METHOD_NAME} `inputs` cannot be None or empty.")
        outputs = {**self.loss, **self.predictions, **self.metrics}
        return saved_model_io.SignatureDef(
            {key: saved_model_io.tensor_info(tensor) for key, tensor in receiver_tensors.items()},
            {key: saved_model_io.tensor_info(tensor) for key, tensor in outputs.items()}, self.METHOD_NAME)


class TrainOutput(_SupervisedOutput):
    """The signature of an exported TRAIN graph (``tensorflow/supervised/training``)."""

    METHOD_NAME = saved_model_io.SUPERVISED_TRAIN_METHOD_NAME


class EvalOutput(_SupervisedOutput):
    """The signature of an exported EVAL graph (``tensorflow/supervised/eval``)."""

    METHOD_NAME = saved_model_io.SUPERVISED_EVAL_METHOD_NAME


def _output_key(key: Any, what: str) -> str:
    """A string key; a tuple of strings (a multi-head model's) joined by '/'."""
    if isinstance(key, tuple):
        key = "/".join(key)
    if not isinstance(key, str):
        raise ValueError(f"{what} output key must be a string; got {key}.")
    return key


def _named_tensors(outputs: Any, single_name: str) -> dict[str, graph_lib.Tensor]:
    if not isinstance(outputs, dict):
        outputs = {single_name: outputs}
    named = {}
    for key, tensor in outputs.items():
        key = _output_key(key, single_name)
        if not isinstance(tensor, graph_lib.Tensor):
            raise ValueError(f"{single_name} output value must be a Tensor; got {tensor}.")
        named[key] = tensor
    return named


def _prefixed(outputs: dict[str, graph_lib.Tensor], prefix: str) -> dict[str, graph_lib.Tensor]:
    return {key if key.startswith(prefix) else f"{prefix}/{key}": tensor for key, tensor in outputs.items()}


def _metric_outputs(metrics: Any) -> dict[str, graph_lib.Tensor]:
    if not isinstance(metrics, dict):
        metrics = {"metrics": metrics}
    outputs = {}
    for key, pair in metrics.items():
        key = _output_key(key, "metrics")
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"metric {key} must be a (value, update_op) tuple; got {pair}.")
        value, update = pair
        key = key if key.startswith("metrics") else f"metrics/{key}"
        if not isinstance(value, graph_lib.Tensor):
            raise ValueError(f"{key} output value must be a Tensor; got {value}.")
        if not isinstance(update, (graph_lib.Tensor, graph_lib.Operation)):
            raise ValueError(f"{key} update_op must be a Tensor or Operation; got {update}.")
        if isinstance(update, graph_lib.Operation):
            with update.graph.control_dependencies([update]):
                update = constant_op.constant([], name="metric_op_wrapper")
        outputs[f"{key}/value"] = value
        outputs[f"{key}/update_op"] = update
    return outputs


def export_outputs_with_default(export_outputs: Optional[dict[str, Any]], predictions: Any) -> dict[str, ExportOutput]:
    """A PREDICT spec's export outputs, checked: a PredictOutput of the predictions when none were
    given; a single one is also the default signature; several must name the default."""
    if export_outputs is None:
        return {DEFAULT_SERVING_KEY: PredictOutput(predictions)}
    if not isinstance(export_outputs, dict):
        raise TypeError(f"export_outputs must be dict, given: {export_outputs}")
    for key, output in export_outputs.items():
        if not isinstance(key, str):
            raise ValueError(f"export_outputs keys must be strings; got {key!r}")
        if not isinstance(output, ExportOutput):
            raise TypeError(f"Values in export_outputs must be ExportOutput objects. Given: {export_outputs}")
    outputs = dict(export_outputs)
    if DEFAULT_SERVING_KEY not in outputs:
        if len(outputs) != 1:
            raise ValueError("Multiple export_outputs were provided, but none of them is specified as the default. "
                             f"Do this by naming one of them with {DEFAULT_SERVING_KEY!r}; given {sorted(outputs)}")
        outputs[DEFAULT_SERVING_KEY] = next(iter(outputs.values()))
    return outputs


def signature_defs(export_outputs: dict[str, ExportOutput], receiver_tensors: Any,
                   receiver_tensors_alternatives: Optional[dict[str, Any]] = None) -> dict[str, saved_model_io.SignatureDef]:
    """Every export output as a signature over the receiver tensors (and over each alternative,
    keyed ``<receiver>:<output>``); those the receiver cannot feed (a classify signature over
    several inputs) are left out, as TensorFlow leaves them out, with a log line."""
    receivers: dict[Optional[str], Any] = {None: receiver_tensors}
    receivers.update(receiver_tensors_alternatives or {})
    signatures: dict[str, saved_model_io.SignatureDef] = {}
    for receiver_name, tensors in receivers.items():
        for output_key, output in export_outputs.items():
            key = output_key if receiver_name is None else f"{receiver_name}:{output_key}"
            try:
                signatures[key] = output.as_signature_def(tensors)
            except ValueError as e:
                log.warning("Export includes no signature %r: %s", key, e)
    if not signatures:
        raise ValueError("Export failed: no signature fits the serving input receiver's tensors "
                         f"{receiver_tensors} (see the warnings above)")
    return signatures
