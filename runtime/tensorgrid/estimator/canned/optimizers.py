"""The optimizer a canned estimator trains with, from what its user gave: an ``Optimizer``, a
callable that makes one, or a name ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD') with the
estimator's default learning rate (TensorFlow Estimator's ``get_optimizer_instance``)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from tensorgrid.train import adagrad
from tensorgrid.train import adam
from tensorgrid.train import ftrl
from tensorgrid.train import gradient_descent
from tensorgrid.train import optimizer as optimizer_lib
from tensorgrid.train import rmsprop

OPTIMIZERS_BY_NAME: dict[str, Callable[..., optimizer_lib.Optimizer]] = {
    "Adagrad": adagrad.AdagradOptimizer,
    "Adam": adam.AdamOptimizer,
    "Ftrl": ftrl.FtrlOptimizer,
    "RMSProp": rmsprop.RMSPropOptimizer,
    "SGD": gradient_descent.GradientDescentOptimizer,
}


def get_optimizer_instance(opt: Any, learning_rate: Optional[float] = None) -> optimizer_lib.Optimizer:
    """``opt`` as an Optimizer: a name gets ``learning_rate``; a callable is called; an instance is kept."""
    if isinstance(opt, str):
        if opt not in OPTIMIZERS_BY_NAME:
            raise ValueError(f"Unsupported optimizer name: {opt}. Supported names are: {tuple(sorted(OPTIMIZERS_BY_NAME))}")
        if not learning_rate:
            raise ValueError("learning_rate must be specified when opt is string.")
        return OPTIMIZERS_BY_NAME[opt](learning_rate=learning_rate)
    if callable(opt):
        opt = opt()
    if not isinstance(opt, optimizer_lib.Optimizer):
        raise ValueError(f"The given object is not an Optimizer instance. Given: {opt}")
    return opt
