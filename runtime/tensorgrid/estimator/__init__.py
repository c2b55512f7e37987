"""``tf.estimator``: TF1's Estimators (``Estimator``, ``RunConfig``, ``EstimatorSpec``, ``ModeKeys``,
``TrainSpec``, ``EvalSpec``, ``train_and_evaluate``, ``export``, the Exporters) and the canned estimators, above
the train and distributed layers."""

from __future__ import annotations

import types

from tensorgrid.estimator.canned.dnn import DNNClassifier, DNNRegressor
from tensorgrid.estimator.canned.dnn_linear_combined import DNNLinearCombinedClassifier, DNNLinearCombinedRegressor
from tensorgrid.estimator.canned.linear import LinearClassifier, LinearRegressor
from tensorgrid.estimator import export
from tensorgrid.estimator import inputs
from tensorgrid.estimator.estimator import Estimator
from tensorgrid.estimator.exporter import Exporter, FinalExporter, LatestExporter
from tensorgrid.estimator.model_fn import EstimatorSpec, ModeKeys
from tensorgrid.estimator.run_config import RunConfig
from tensorgrid.estimator.training import EvalSpec, TrainSpec, train_and_evaluate
from tensorgrid.train.vocab_remapping import VocabInfo
from tensorgrid.estimator.warm_starting import WarmStartSettings

experimental = types.SimpleNamespace(build_raw_supervised_input_receiver_fn=export.build_raw_supervised_input_receiver_fn)
"""``tf.estimator.experimental``: what TensorFlow 1.x keeps there of the export API."""

__all__ = [
    "DNNClassifier", "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "DNNRegressor", "Estimator",
    "EstimatorSpec", "EvalSpec", "Exporter", "FinalExporter", "LatestExporter", "LinearClassifier", "LinearRegressor", "ModeKeys", "RunConfig", "TrainSpec",
    "VocabInfo", "WarmStartSettings", "experimental", "export", "inputs", "train_and_evaluate",
]
