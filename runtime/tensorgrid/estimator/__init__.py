"""``tf.estimator``: TF1's Estimators (``Estimator``, ``RunConfig``, ``EstimatorSpec``, ``ModeKeys``,
``TrainSpec``, ``EvalSpec``, ``train_and_evaluate``), above the train and distributed layers."""

from __future__ import annotations

from tensorgrid.estimator.estimator import Estimator
from tensorgrid.estimator.model_fn import EstimatorSpec, ModeKeys
from tensorgrid.estimator.run_config import RunConfig
from tensorgrid.estimator.training import EvalSpec, TrainSpec, train_and_evaluate

__all__ = ["Estimator", "EstimatorSpec", "EvalSpec", "ModeKeys", "RunConfig", "TrainSpec", "train_and_evaluate"]
