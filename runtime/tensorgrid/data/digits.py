"""The 8x8 handwritten digits, read from the copy inside scikit-learn's wheel.

1797 grey-level images of the digits 0-9 (UCI "optdigits" test set), 64 pixels
each with values 0-16. scikit-learn ships them as ``sklearn/datasets/data/digits.csv.gz``
(64 pixel columns then the label), so examples and tests get a real data set with no
download at run time. The file is read directly: importing scikit-learn takes seconds
and brings nothing we need.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import pathlib
from typing import Union

import numpy as np

NUM_CLASSES = 10
IMAGE_SHAPE = (8, 8)
NUM_EXAMPLES = 1797
DEFAULT_TEST_SIZE = 360
_MAX_PIXEL = 16.0
_INSTALL_HINT = "pip install 'tensorgrid[data]' (or scikit-learn>=1.3)"


@dataclasses.dataclass(frozen=True)
class Examples:
    """One part of a data set, as numpy arrays ready to feed."""

    images: np.ndarray
    """float32, (N, pixels), values in [0, 1]."""
    labels: np.ndarray
    """int64, (N,), class ids in [0, num_classes)."""

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclasses.dataclass(frozen=True)
class TrainTestSplit:
    """A train/test pair and what a model needs to know about it."""

    train: Examples
    test: Examples
    num_classes: int
    """Number of classes; labels are 0 .. num_classes - 1."""
    image_shape: tuple[int, int]
    """(rows, cols) of one image; ``images`` holds them flattened row by row."""


def digits_csv_path() -> pathlib.Path:
    """Where scikit-learn keeps ``digits.csv.gz``; an ImportError says how to get it."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"The digits data set ships with scikit-learn, which is not installed: {_INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        candidate = pathlib.Path(location) / "datasets" / "data" / "digits.csv.gz"
        if candidate.is_file():
            return candidate
    raise ImportError(
        f"scikit-learn is installed at {list(spec.submodule_search_locations)} but has no "
        f"datasets/data/digits.csv.gz; reinstall it: {_INSTALL_HINT}"
    )


def read_digits_csv(path: Union[str, pathlib.Path, None] = None) -> tuple[np.ndarray, np.ndarray]:
    """All 1797 digits as (float32 images (N, 64) in [0, 1], int64 labels (N,)), in file order."""
    path = pathlib.Path(path) if path is not None else digits_csv_path()
    with gzip.open(path, "rt") as stream:
        table = np.loadtxt(stream, delimiter=",", dtype=np.float64, ndmin=2)
    pixels = IMAGE_SHAPE[0] * IMAGE_SHAPE[1]
    if table.shape[1] != pixels + 1:
        raise ValueError(f"{path}: expected {pixels + 1} columns (64 pixels and a label), got {table.shape[1]}")
    labels = table[:, -1]
    if not np.all((labels >= 0) & (labels < NUM_CLASSES) & (labels == np.round(labels))):
        raise ValueError(f"{path}: labels must be integers in [0, {NUM_CLASSES}), got {np.unique(labels)}")
    images = (table[:, :-1] / _MAX_PIXEL).astype(np.float32)
    return images, labels.astype(np.int64)


def stratified_split(labels: np.ndarray, test_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test) with each class in the test part in proportion to its size.

    Each class gives ``test_size * class_count / N`` examples, rounded by largest
    remainder so the test part has exactly ``test_size``; both parts are shuffled.
    The same labels and seed always give the same split.
    """
    labels = np.asarray(labels)
    total = labels.shape[0]
    if not 0 < test_size < total:
        raise ValueError(f"test_size must be between 1 and {total - 1} (the number of examples - 1), got {test_size}")
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    quotas = test_size * counts / total
    per_class = np.floor(quotas).astype(np.int64)
    shortfall = test_size - int(per_class.sum())
    per_class[np.argsort(-(quotas - per_class), kind="stable")[:shortfall]] += 1
    train_parts, test_parts = [], []
    for cls, take in zip(classes, per_class):
        members = rng.permutation(np.flatnonzero(labels == cls))
        test_parts.append(members[:take])
        train_parts.append(members[take:])
    return rng.permutation(np.concatenate(train_parts)), rng.permutation(np.concatenate(test_parts))


def load_digits(test_size: int = DEFAULT_TEST_SIZE, seed: int = 0,
                path: Union[str, pathlib.Path, None] = None) -> TrainTestSplit:
    """The digits, split into train (1437 by default) and test (360) with a fixed seed.

    Images are float32 (N, 64) scaled to [0, 1]; labels int64 (N,). Reshape the images
    to ``[-1, 8, 8, 1]`` for a convolutional model. ``path`` reads another copy of
    ``digits.csv.gz`` instead of scikit-learn's.
    """
    images, labels = read_digits_csv(path)
    train_idx, test_idx = stratified_split(labels, test_size, seed)
    return TrainTestSplit(
        train=Examples(images[train_idx], labels[train_idx]),
        test=Examples(images[test_idx], labels[test_idx]),
        num_classes=NUM_CLASSES,
        image_shape=IMAGE_SHAPE,
    )

