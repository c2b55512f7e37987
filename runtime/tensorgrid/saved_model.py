"""``tf.saved_model`` (TF1's ``tf.compat.v1.saved_model``): loading a model ``Estimator.export_saved_model``
wrote, for prediction in another process. The format is tensorgrid's own (``train/saved_model_io.py``,
docs/differences.md): ``loader.load`` reads it, and TensorFlow's ``saved_model.pb`` is refused by name."""

from __future__ import annotations

import types

from tensorgrid.train import saved_model_io

SERVING = saved_model_io.SERVING
TRAINING = saved_model_io.TRAINING
DEFAULT_SERVING_SIGNATURE_DEF_KEY = saved_model_io.DEFAULT_SERVING_SIGNATURE_DEF_KEY
load = saved_model_io.load
contains_saved_model = saved_model_io.contains_saved_model

loader = types.SimpleNamespace(load=saved_model_io.load, maybe_saved_model_directory=saved_model_io.contains_saved_model)
"""``tf.saved_model.loader``."""
tag_constants = types.SimpleNamespace(SERVING=SERVING, TRAINING=TRAINING)
"""``tf.saved_model.tag_constants``: the tags a model is saved and loaded with."""
signature_constants = types.SimpleNamespace(
    DEFAULT_SERVING_SIGNATURE_DEF_KEY=DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    PREDICT_METHOD_NAME=saved_model_io.PREDICT_METHOD_NAME, CLASSIFY_METHOD_NAME=saved_model_io.CLASSIFY_METHOD_NAME,
    REGRESS_METHOD_NAME=saved_model_io.REGRESS_METHOD_NAME, CLASSIFY_INPUTS="inputs", CLASSIFY_OUTPUT_CLASSES="classes",
    CLASSIFY_OUTPUT_SCORES="scores", REGRESS_INPUTS="inputs", REGRESS_OUTPUTS="outputs")
"""``tf.saved_model.signature_constants``: the keys and method names of the signatures."""
utils = types.SimpleNamespace(build_tensor_info=saved_model_io.tensor_info,
                              get_tensor_from_tensor_info=saved_model_io.tensor_from_tensor_info)
"""``tf.saved_model.utils``: a signature's TensorInfo of a Tensor or SparseTensor, and back."""

__all__ = ["DEFAULT_SERVING_SIGNATURE_DEF_KEY", "SERVING", "TRAINING", "contains_saved_model", "load", "loader",
           "signature_constants", "tag_constants", "utils"]
