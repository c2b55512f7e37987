"""Data sets and batches: the bundled digits, MNIST's IDX files, fixed-size shuffled batches."""

from __future__ import annotations

import gzip
import importlib.util
import pathlib

import numpy as np
import pytest

from tensorgrid import data


# ---------------------------------------------------------------- the 8x8 digits

@pytest.fixture(scope="module")
def digits() -> data.TrainTestSplit:
    return data.load_digits()


def test_digits_are_split_1437_360_with_images_in_unit_range(digits: data.TrainTestSplit) -> None:
    assert (digits.train.images.shape, digits.test.images.shape) == ((1437, 64), (360, 64))
    assert digits.train.images.dtype == np.float32 and digits.train.labels.dtype == np.int64
    assert digits.num_classes == 10 and digits.image_shape == (8, 8)
    for split in (digits.train, digits.test):
        assert split.images.min() == 0.0 and split.images.max() == 1.0
        assert set(np.unique(split.labels)) == set(range(10))


def test_digits_match_scikit_learns_own_loader() -> None:
    import sklearn.datasets as sklearn_datasets  # the [dev] extra
    reference = sklearn_datasets.load_digits()
    images, labels = data.read_digits_csv()
    np.testing.assert_array_equal(images * 16, reference.data)
    np.testing.assert_array_equal(labels, reference.target)


def test_digits_split_is_stratified_disjoint_and_complete() -> None:
    _, labels = data.read_digits_csv()
    train, test = data.stratified_split(labels, test_size=360, seed=0)
    assert len(test) == 360 and len(train) == 1437
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(len(labels)))
    expected = 360 * np.bincount(labels) / len(labels)
    assert np.all(np.abs(np.bincount(labels[test]) - expected) < 1)


def test_digits_split_depends_only_on_the_seed(digits: data.TrainTestSplit) -> None:
    again = data.load_digits(seed=0)
    np.testing.assert_array_equal(again.test.images, digits.test.images)
    np.testing.assert_array_equal(again.train.labels, digits.train.labels)
    other = data.load_digits(seed=1)
    assert not np.array_equal(other.test.images, digits.test.images)


@pytest.mark.parametrize("test_size", [0, 1797, -5])
def test_digits_reject_a_test_size_outside_the_data(test_size: int) -> None:
    with pytest.raises(ValueError, match=f"test_size must be between 1 and 1796.*got {test_size}"):
        data.load_digits(test_size=test_size)


def test_digits_without_scikit_learn_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match=r"pip install 'tensorgrid\[data\]'"):
        data.load_digits()


def test_digits_from_another_csv_copy(tmp_path: pathlib.Path) -> None:
    rows = np.zeros((20, 65))
    rows[:, 0] = 16
    rows[:, -1] = np.arange(20) % 10
    path = tmp_path / "digits.csv.gz"
    with gzip.open(path, "wt") as stream:
        np.savetxt(stream, rows, delimiter=",", fmt="%d")
    copy = data.load_digits(test_size=10, path=path)
    assert len(copy.train) == 10 and np.bincount(copy.test.labels).tolist() == [1] * 10
    assert np.all(copy.test.images[:, 0] == 1.0)


def test_digits_csv_with_a_wrong_column_count_names_the_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.csv.gz"
    with gzip.open(path, "wt") as stream:
        stream.write("1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match=r"bad\.csv\.gz: expected 65 columns"):
        data.read_digits_csv(path)


# ---------------------------------------------------------------- IDX files

@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_idx_round_trips_every_type_compressed_or_not(tmp_path: pathlib.Path, dtype: type, suffix: str) -> None:
    array = (np.arange(2 * 3 * 4) - 5).reshape(2, 3, 4).astype(dtype)
    path = tmp_path / f"array.idx{suffix}"
    data.write_idx(path, array)
    if suffix:
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    back = data.read_idx(path)
    assert back.dtype == dtype and back.dtype.isnative
    np.testing.assert_array_equal(back, array)


def test_idx_layout_is_the_documented_big_endian_one(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "labels-idx1-ubyte"
    data.write_idx(path, np.array([7, 2, 1], dtype=np.uint8))
    assert path.read_bytes() == b"\x00\x00\x08\x01" + b"\x00\x00\x00\x03" + b"\x07\x02\x01"
    path = tmp_path / "ints-idx1-int"
    data.write_idx(path, np.array([258], dtype=np.int32))
    assert path.read_bytes() == b"\x00\x00\x0c\x01\x00\x00\x00\x01\x00\x00\x01\x02"


def _mnist_like(count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(count)
    images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=count, dtype=np.uint8)
    return images, labels


def test_mnist_images_and_labels_round_trip(tmp_path: pathlib.Path) -> None:
    images, labels = _mnist_like(5)
    data.write_idx(tmp_path / "i.gz", images)
    data.write_idx(tmp_path / "l", labels)
    np.testing.assert_array_equal(data.read_mnist_images(tmp_path / "i.gz"), images)
    np.testing.assert_array_equal(data.read_mnist_labels(tmp_path / "l"), labels)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x00", r"2 bytes is too short for an IDX header"),
        (b"\x12\x34\x08\x01\x00\x00\x00\x01\x05", r"bad magic number 0x12340801"),
        (b"\x00\x00\x0a\x01\x00\x00\x00\x01\x05", r"unknown IDX type code 0x0A.*valid codes: 0x08 \(uint8\)"),
        (b"\x00\x00\x08\x03\x00\x00\x00\x01", r"truncated header: 3 dimensions need 16 bytes, file has 8"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x04\x01\x02", r"truncated: dimensions \(4,\) of >?uint8 need 12 bytes"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x01\x01\x02", r"has trailing bytes: dimensions \(1,\)"),
    ],
    ids=["short", "magic", "type-code", "header", "truncated", "trailing"],
)
def test_malformed_idx_files_are_rejected_naming_the_file(tmp_path: pathlib.Path, content: bytes, message: str) -> None:
    path = tmp_path / "broken-idx1-ubyte"
    path.write_bytes(content)
    with pytest.raises(data.IdxFormatError, match=r"broken-idx1-ubyte: " + message):
        data.read_idx(path)


def test_truncated_gzip_is_rejected_naming_the_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "train-images-idx3-ubyte.gz"
    data.write_idx(path, np.zeros((10, 28, 28), dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(data.IdxFormatError, match=r"train-images-idx3-ubyte\.gz: corrupt or truncated gzip"):
        data.read_idx(path)


def test_mnist_readers_check_rank_type_and_label_range(tmp_path: pathlib.Path) -> None:
    data.write_idx(tmp_path / "labels", np.array([1, 2], dtype=np.uint8))
    with pytest.raises(data.IdxFormatError, match=r"labels: expected idx3-ubyte images.*shape \(2,\)"):
        data.read_mnist_images(tmp_path / "labels")
    data.write_idx(tmp_path / "floats", np.zeros(2, dtype=np.float32))
    with pytest.raises(data.IdxFormatError, match=r"floats: expected idx1-ubyte labels.*got float32"):
        data.read_mnist_labels(tmp_path / "floats")
    data.write_idx(tmp_path / "eleven", np.array([3, 11], dtype=np.uint8))
    with pytest.raises(data.IdxFormatError, match=r"eleven: label 11 is not below num_classes=10"):
        data.read_mnist_labels(tmp_path / "eleven")


def test_write_idx_rejects_types_the_format_cannot_hold(tmp_path: pathlib.Path) -> None:
    with pytest.raises(TypeError, match=r"IDX cannot store int64 values .*valid: uint8, int8"):
        data.write_idx(tmp_path / "x", np.zeros(3, dtype=np.int64))


def test_load_mnist_reads_the_four_standard_files(tmp_path: pathlib.Path) -> None:
    train_images, train_labels = _mnist_like(6)
    test_images, test_labels = _mnist_like(3)
    data.write_idx(tmp_path / "train-images-idx3-ubyte.gz", train_images)
    data.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", train_labels)
    data.write_idx(tmp_path / "t10k-images-idx3-ubyte", test_images)
    data.write_idx(tmp_path / "t10k-labels-idx1-ubyte", test_labels)
    mnist = data.load_mnist(tmp_path)
    assert mnist.image_shape == (28, 28) and mnist.num_classes == 10
    assert mnist.train.images.shape == (6, 784) and mnist.train.images.dtype == np.float32
    np.testing.assert_allclose(mnist.test.images * 255, test_images.reshape(3, 784))
    np.testing.assert_array_equal(mnist.train.labels, train_labels.astype(np.int64))


def test_load_mnist_reports_missing_files_and_count_mismatches(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"neither train-images-idx3-ubyte nor train-images-idx3-ubyte\.gz"):
        data.load_mnist(tmp_path)
    images, labels = _mnist_like(4)
    data.write_idx(tmp_path / "train-images-idx3-ubyte", images)
    data.write_idx(tmp_path / "train-labels-idx1-ubyte", labels[:3])
    with pytest.raises(data.IdxFormatError, match=r"holds 4 images but .*train-labels-idx1-ubyte holds 3 labels"):
        data.load_mnist(tmp_path)


# ---------------------------------------------------------------- batches

def test_batches_have_a_fixed_size_and_cover_each_epoch_once() -> None:
    images, labels = np.arange(10.0).reshape(10, 1), np.arange(10)
    stream = data.Batches(images, labels, batch_size=5, seed=3)
    first = np.concatenate([stream.next_batch()[1] for _ in range(2)])
    assert stream.epochs_completed == 1
    second = np.concatenate([stream.next_batch()[1] for _ in range(2)])
    assert sorted(first) == sorted(second) == list(range(10))
    assert first.tolist() != second.tolist(), "every epoch is reshuffled"
    x, y = stream.next_batch()
    np.testing.assert_array_equal(x[:, 0], y)  # arrays stay aligned


def test_batches_top_up_the_end_of_an_epoch_from_the_next() -> None:
    stream = data.Batches(np.arange(7), batch_size=3, seed=0)
    seen = [stream.next_batch()[0] for _ in range(7)]
    assert all(len(batch) == 3 for batch in seen)
    flat = np.concatenate(seen)
    assert sorted(flat[:7]) == sorted(flat[7:14]) == sorted(flat[14:21]) == list(range(7))
    assert stream.epochs_completed == 3


def test_batches_are_reproducible_from_the_seed() -> None:
    def draw(seed: int) -> list[list[int]]:
        return [b[0].tolist() for b, _ in zip(data.batches(np.arange(50), batch_size=8, seed=seed), range(9))]

    assert draw(1) == draw(1) and draw(1) != draw(2)
    unshuffled = data.Batches(np.arange(4), batch_size=3, shuffle=False)
    assert [unshuffled.next_batch()[0].tolist() for _ in range(2)] == [[0, 1, 2], [3, 0, 1]]


def test_a_batch_larger_than_the_data_spans_several_epochs() -> None:
    (batch,) = data.Batches(np.arange(3), batch_size=7, seed=0).next_batch()
    assert len(batch) == 7 and set(batch) == {0, 1, 2}


def test_epoch_batches_make_one_ordered_pass() -> None:
    parts = list(data.epoch_batches(np.arange(7), np.arange(7) * 2, batch_size=3))
    assert [p[0].tolist() for p in parts] == [[0, 1, 2], [3, 4, 5], [6]]
    assert parts[2][1].tolist() == [12]


@pytest.mark.parametrize(
    ("arrays", "batch_size", "message"),
    [
        ((np.arange(3), np.arange(4)), 2, r"same first dimension, got \[3, 4\]"),
        ((np.arange(0),), 2, "no examples"),
        ((np.arange(3),), 0, "batch_size must be a positive integer, got 0"),
        ((), 2, "at least one array"),
    ],
)
def test_batches_reject_bad_arguments(arrays: tuple[np.ndarray, ...], batch_size: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        data.Batches(*arrays, batch_size=batch_size)
