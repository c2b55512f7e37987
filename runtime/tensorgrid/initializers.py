"""``tf.initializers``: the initializer classes under their short names, and variable initializers."""

from __future__ import annotations

from tensorgrid.ops.init_ops import (
    Constant as constant, GlorotNormal as glorot_normal, GlorotUniform as glorot_uniform, Ones as ones,
    RandomNormal as random_normal, RandomUniform as random_uniform, TruncatedNormal as truncated_normal,
    VarianceScaling as variance_scaling, Zeros as zeros, he_normal, he_uniform, lecun_normal, lecun_uniform,
)
from tensorgrid.ops.lookup_ops import tables_initializer
from tensorgrid.ops.variables import (
    global_variables_initializer as global_variables, local_variables_initializer as local_variables,
    variables_initializer as variables,
)

__all__ = [
    "constant", "glorot_normal", "glorot_uniform", "ones", "random_normal", "random_uniform", "truncated_normal",
    "variance_scaling", "zeros", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform",
    "global_variables", "local_variables", "variables", "tables_initializer",
]
