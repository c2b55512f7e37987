"""``tf.estimator``: TF1's Estimators (``Estimator``, ``RunConfig``, ``EstimatorSpec``, ``ModeKeys``,
``TrainSpec``, ``EvalSpec``, ``train_and_evaluate``) and the canned estimators, above the train and distributed layers."""

from __future__ import annotations

from tensorgrid.estimator.canned.dnn import DNNClassifier, DNNRegressor
from tensorgrid.estimator.canned.dnn_linear_combined import DNNLinearCombinedClassifier, DNNLinearCombinedRegressor
from tensorgrid.estimator.canned.linear import LinearClassifier, LinearRegressor
from tensorgrid.estimator.estimator import Estimator
from tensorgrid.estimator.model_fn import EstimatorSpec, ModeKeys
from tensorgrid.estimator.run_config import RunConfig
from tensorgrid.estimator.training import EvalSpec, TrainSpec, train_and_evaluate

__all__ = [
    "DNNClassifier", "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "DNNRegressor", "Estimator",
    "EstimatorSpec", "EvalSpec", "LinearClassifier", "LinearRegressor", "ModeKeys", "RunConfig", "TrainSpec",
    "train_and_evaluate",
]
