"""``tf.estimator.inputs.numpy_input_fn``: the input function TF1 programs hand an Estimator when
their data is already in numpy arrays (aymericdamien's ``neural_network.py`` and
``convolutional_network.py`` train and evaluate through it).

TF1 builds a feeding queue and queue runners; here the same batches come from a ``tf.data``
pipeline over the arrays (``from_tensor_slices``, ``repeat(num_epochs)``, ``shuffle`` with the
queue's capacity, ``batch``), which the Estimator reads as it reads any input. What a program sees
is TF1's: the argument checks and their errors, a dict of features under x's keys (or one tensor
when x is an array), labels likewise, full batches of a static size when ``num_epochs`` is None, a
last partial batch and then the end of input when it is set, the arrays' dtypes.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Optional

import numpy as np

from tensorgrid.data import dataset_ops

_TARGET_KEY = "__target_key__"
"""The key the labels travel under beside x's keys when y is one array (TF1's name)."""


def _as_ordered_features(x: Any) -> "collections.OrderedDict[str, np.ndarray]":
    if isinstance(x, dict):
        if not x:
            raise ValueError("x cannot be an empty dict")
        return collections.OrderedDict(sorted(x.items(), key=lambda item: item[0]))
    if isinstance(x, np.ndarray):
        if x.size == 0:
            raise ValueError("x cannot be an empty array")
        return collections.OrderedDict({"__direct_np_input__": x})
    raise TypeError(f"x must be a dict or array; got {type(x).__name__}")


def _unique_target_key(features: "collections.OrderedDict[str, np.ndarray]") -> str:
    key = _TARGET_KEY
    while key in features:
        key += "_n"
    return key


def numpy_input_fn(x: Any, y: Any = None, batch_size: int = 128, num_epochs: Optional[int] = 1,
                   shuffle: Any = None, queue_capacity: int = 1000, num_threads: int = 1) -> Callable[[], Any]:
    """An input_fn giving batches of ``x`` (a dict of arrays, or one array) and ``y`` (an array, a dict
    of arrays, or None), ``num_epochs`` times over (None: for ever), shuffled when ``shuffle`` is True.
    ``num_threads`` is accepted for TF1's signature; one pipeline reads the arrays."""
    if not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean (it is recommended to set it "
                         f"as True for training); got {shuffle}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if num_epochs is not None and (isinstance(num_epochs, bool) or not isinstance(num_epochs, int)
                                   or num_epochs < 1):
        raise ValueError(f"num_epochs must be None (for ever) or a positive integer, got {num_epochs!r}")
    if isinstance(queue_capacity, bool) or not isinstance(queue_capacity, int) or queue_capacity < 1:
        raise ValueError(f"queue_capacity must be a positive integer, got {queue_capacity!r}")

    def input_fn() -> Any:
        data = _as_ordered_features(x)
        feature_keys = list(data)
        target_keys: Any = None
        if isinstance(y, dict):
            if not y:
                raise ValueError("y cannot be empty dict, use None instead.")
            ordered_y = collections.OrderedDict(sorted(y.items(), key=lambda item: item[0]))
            duplicates = set(feature_keys) & set(ordered_y)
            if duplicates:
                raise ValueError(f"{len(duplicates)} duplicate keys are found in both x and y: {duplicates}")
            target_keys = list(ordered_y)
            data.update(ordered_y)
        elif y is not None:
            target_keys = _unique_target_key(data)
            data[target_keys] = y
        if len({np.shape(value)[0] for value in data.values()}) != 1:
            x_shapes = {key: np.shape(data[key]) for key in feature_keys}
            y_shapes = (None if target_keys is None else np.shape(y) if isinstance(target_keys, str)
                        else {key: np.shape(data[key]) for key in target_keys})
            raise ValueError("Length of tensors in x and y is mismatched. All elements in x and y must have the "
                             f"same length.\nShapes in x: {x_shapes}\nShapes in y: {y_shapes}\n")
        dataset = dataset_ops.Dataset.from_tensor_slices(dict(data)).repeat(num_epochs)
        if shuffle:
            dataset = dataset.shuffle(queue_capacity)
        batch = dataset.batch(batch_size, drop_remainder=num_epochs is None).make_one_shot_iterator().get_next()
        features = batch[feature_keys[0]] if isinstance(x, np.ndarray) else {key: batch[key] for key in feature_keys}
        if target_keys is None:
            return features
        if isinstance(target_keys, str):
            return features, batch[target_keys]
        return features, {key: batch[key] for key in target_keys}

    return input_fn
