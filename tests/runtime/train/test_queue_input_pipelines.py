"""TF1's queue input pipelines, with TensorFlow 2.21's ``tf.compat.v1`` as the oracle.

The same pipeline is built and drained on both libraries the way TF1 programs drain them
(``Coordinator`` + ``start_queue_runners``, a loop until OutOfRangeError): file names from
``string_input_producer``, records from a reader, examples parsed and batched. Without
shuffling the batches must be the same, in the same order; with ``shuffle_batch`` the
same elements in batches of the same sizes. The queue runners and summaries the functions
add are compared by name.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

pytestmark = pytest.mark.timeout(120)


def write_examples(lib: Any, directory: Any, files: int = 3, per_file: int = 5) -> list[str]:
    """TFRecord files of tf.train.Examples {"x": [n, n / 2], "y": n}, n = 10 * file + record."""
    paths = []
    for f in range(files):
        path = str(directory / f"part-{f}.tfrecord")
        with lib.io.TFRecordWriter(path) as writer:
            for i in range(per_file):
                n = 10 * f + i
                example = lib.train.Example(features=lib.train.Features(feature={
                    "x": lib.train.Feature(float_list=lib.train.FloatList(value=[n, n / 2])),
                    "y": lib.train.Feature(int64_list=lib.train.Int64List(value=[n]))}))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def parsed(lib: Any, serialized: Any) -> tuple[Any, Any]:
    features = lib.parse_single_example(serialized, {"x": lib.FixedLenFeature([2], lib.float32),
                                                     "y": lib.FixedLenFeature([], lib.int64)})
    return features["x"], features["y"]


def drain(lib: Any, build: Callable[[Any], Any], limit: int = 200) -> dict[str, Any]:
    """Builds a pipeline in a new graph and runs its fetches until the input ends.

    Returns the values of every run, the class of the error that ended it and the names
    of the queue runners' queues and of the summaries."""
    with lib.Graph().as_default() as graph:
        fetches = build(lib)
        with lib.Session() as session:
            session.run([lib.global_variables_initializer(), lib.local_variables_initializer()])
            coord = lib.train.Coordinator()
            threads = lib.train.start_queue_runners(session, coord)
            runs, ended = [], None
            try:
                while not coord.should_stop() and len(runs) < limit:
                    runs.append(session.run(fetches))
            except lib.errors.OutOfRangeError as exc:
                ended = type(exc).__name__
            finally:
                coord.request_stop()
            coord.join(threads, stop_grace_period_secs=10)
        return {
            "runs": runs, "ended": ended,
            "queues": sorted(qr.queue.name for qr in graph.get_collection(lib.GraphKeys.QUEUE_RUNNERS)),
            "summaries": sorted(s.op.name for s in graph.get_collection(lib.GraphKeys.SUMMARIES)),
        }


def static_shapes(fetches: Any) -> list[Any]:
    flat = fetches if isinstance(fetches, (list, tuple)) else [fetches]
    return [t.shape.as_list() for t in flat]


def same_runs(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for mine, expected in zip(ours, theirs):
        mine_flat = mine if isinstance(mine, (list, tuple)) else [mine]
        expected_flat = expected if isinstance(expected, (list, tuple)) else [expected]
        assert len(mine_flat) == len(expected_flat)
        for a, b in zip(mine_flat, expected_flat):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def both(tf1: Any, build: Callable[[Any], Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return drain(tensorgrid, build), drain(tf1, build)


@pytest.mark.parametrize("allow_smaller_final_batch", [True, False])
def test_tfrecord_files_batched_in_order_until_the_epochs_end(tf1: Any, tmp_path: Any,
                                                                allow_smaller_final_batch: bool) -> None:
    paths = write_examples(tensorgrid, tmp_path)
    shapes = {}

    def build(lib: Any) -> Any:
        filenames = lib.train.string_input_producer(paths, num_epochs=2, shuffle=False)
        key, value = lib.TFRecordReader().read(filenames)
        x, y = parsed(lib, value)
        batch = lib.train.batch([x, y, key], batch_size=4, allow_smaller_final_batch=allow_smaller_final_batch)
        shapes[lib.__name__] = static_shapes(batch)
        return batch

    ours, theirs = both(tf1, build)
    assert len(theirs["runs"]) == (8 if allow_smaller_final_batch else 7)  # 30 records in batches of 4
    same_runs(ours["runs"], theirs["runs"])
    assert ours["ended"] == theirs["ended"] == "OutOfRangeError"
    assert ours["queues"] == theirs["queues"] == ["batch/fifo_queue", "input_producer"]
    assert ours["summaries"] == theirs["summaries"]
    assert shapes["tensorgrid"] == list(shapes.values())[1]


def test_shuffle_batch_gives_every_example_once_per_epoch_in_full_batches(tf1: Any, tmp_path: Any) -> None:
    paths = write_examples(tensorgrid, tmp_path, files=4, per_file=6)

    def build(lib: Any) -> Any:
        filenames = lib.train.string_input_producer(paths, num_epochs=2, shuffle=True, seed=3)
        _, value = lib.TFRecordReader().read(filenames)
        x, y = parsed(lib, value)
        return lib.train.shuffle_batch({"x": x, "y": y}, batch_size=5, capacity=20, min_after_dequeue=8,
                                       num_threads=2, seed=7, allow_smaller_final_batch=True)

    ours, theirs = both(tf1, build)
    for result in (ours, theirs):
        assert result["ended"] == "OutOfRangeError"
        ys = collections.Counter(int(y) for run in result["runs"] for y in run["y"])
        assert ys == collections.Counter({10 * f + i: 2 for f in range(4) for i in range(6)})
        for run in result["runs"]:
            np.testing.assert_array_equal(run["x"], np.stack([run["y"], run["y"] / 2], axis=1).astype(np.float32))
    assert [len(r["y"]) for r in ours["runs"]] == [len(r["y"]) for r in theirs["runs"]] == [5] * 9 + [3]
    assert ours["queues"] == theirs["queues"]
    assert ours["summaries"] == theirs["summaries"] == [
        "input_producer/fraction_of_32_full", "shuffle_batch/fraction_over_8_of_12_full"]


def test_fixed_length_records_between_header_and_footer(tf1: Any, tmp_path: Any) -> None:
    paths = []
    for f in range(2):
        path = tmp_path / f"block-{f}.bin"
        body = bytes(range(f * 40, f * 40 + 24))
        path.write_bytes(b"HEAD" + body + b"FOOT!")
        paths.append(str(path))

    def build(lib: Any) -> Any:
        filenames = lib.train.string_input_producer(paths, num_epochs=1, shuffle=False)
        reader = lib.FixedLengthRecordReader(record_bytes=6, header_bytes=4, footer_bytes=5)
        key, value = reader.read(filenames)
        return [key, lib.decode_raw(value, lib.uint8)]

    ours, theirs = both(tf1, build)
    assert len(theirs["runs"]) == 8
    same_runs(ours["runs"], theirs["runs"])
    assert ours["ended"] == theirs["ended"] == "OutOfRangeError"


def test_read_up_to_stops_at_the_end_of_each_file(tf1: Any, tmp_path: Any) -> None:
    paths = write_examples(tensorgrid, tmp_path, files=2, per_file=5)

    def build(lib: Any) -> Any:
        filenames = lib.train.string_input_producer(paths, num_epochs=1, shuffle=False)
        reader = lib.TFRecordReader()
        keys, _ = reader.read_up_to(filenames, 3)
        # The counts read after this step's read: without the dependency either order is valid, on both.
        with lib.control_dependencies([keys]):
            return [keys, reader.num_records_produced(), reader.num_work_units_completed()]

    ours, theirs = both(tf1, build)
    assert [len(run[0]) for run in theirs["runs"]] == [3, 2, 3, 2]
    same_runs(ours["runs"], theirs["runs"])
    assert ours["ended"] == theirs["ended"] == "OutOfRangeError"


def test_text_lines_and_whole_files(tf1: Any, tmp_path: Any) -> None:
    paths = []
    for f in range(2):
        path = tmp_path / f"lines-{f}.csv"
        path.write_bytes(b"header\n" + b"".join(b"%d,%d\r\n" % (f, i) for i in range(3)) + b"last")
        paths.append(str(path))

    def build_lines(lib: Any) -> Any:
        filenames = lib.train.string_input_producer(paths, num_epochs=1, shuffle=False)
        return list(lib.TextLineReader(skip_header_lines=1).read(filenames))

    def build_files(lib: Any) -> Any:
        filenames = lib.train.string_input_producer(paths, num_epochs=2, shuffle=False)
        return list(lib.WholeFileReader().read(filenames))

    for build in (build_lines, build_files):
        ours, theirs = both(tf1, build)
        assert theirs["runs"]
        same_runs(ours["runs"], theirs["runs"])
        assert ours["ended"] == theirs["ended"] == "OutOfRangeError"


def test_range_and_slice_input_producers(tf1: Any) -> None:
    def build_range(lib: Any) -> Any:
        return lib.train.range_input_producer(5, num_epochs=2, shuffle=False, capacity=4).dequeue()

    def build_slices(lib: Any) -> Any:
        features = np.arange(12, dtype=np.float32).reshape(6, 2)
        labels = np.arange(6, dtype=np.int64) * 10
        return lib.train.batch(lib.train.slice_input_producer([features, labels], num_epochs=1, shuffle=False),
                               batch_size=4, allow_smaller_final_batch=True)

    for build in (build_range, build_slices):
        ours, theirs = both(tf1, build)
        assert theirs["runs"]
        same_runs(ours["runs"], theirs["runs"])
        assert ours["ended"] == theirs["ended"] == "OutOfRangeError"
        assert ours["queues"] == theirs["queues"]
        assert ours["summaries"] == theirs["summaries"]


def test_monitored_training_session_starts_the_runners_and_stops_at_the_end(tf1: Any, tmp_path: Any) -> None:
    paths = write_examples(tensorgrid, tmp_path)
    counts = {}
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            filenames = lib.train.string_input_producer(paths, num_epochs=1, shuffle=False)
            _, value = lib.TFRecordReader().read(filenames)
            _, y = parsed(lib, value)
            batch = lib.train.batch([y], batch_size=4)
            seen = []
            with lib.train.MonitoredTrainingSession(log_step_count_steps=None) as session:
                while not session.should_stop():
                    seen.append(session.run(batch).tolist())
            counts[lib.__name__] = seen
    assert list(counts.values())[0] == list(counts.values())[1]


@pytest.mark.parametrize("build", [
    lambda lib: lib.train.string_input_producer([]),
    lambda lib: lib.train.string_input_producer(["a"], num_epochs=0),
    lambda lib: lib.train.shuffle_batch([lib.constant(1.0)], batch_size=2, capacity=10, min_after_dequeue=10),
    lambda lib: lib.train.batch([lib.placeholder(lib.float32, [None])], batch_size=2),
], ids=["no file names", "zero epochs", "capacity not above min_after_dequeue", "shape not fully defined"])
def test_bad_arguments_fail_as_in_tensorflow(tf1: Any, build: Callable[[Any], Any]) -> None:
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            with pytest.raises(ValueError):
                build(lib)


def test_count_up_to_fails_at_its_limit(tf1: Any) -> None:
    results = []
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            counter = lib.Variable(0, dtype=lib.int64)
            step = counter.count_up_to(2)
            with lib.Session() as session:
                session.run(lib.global_variables_initializer())
                values = [int(session.run(step)) for _ in range(2)]
                with pytest.raises(lib.errors.OutOfRangeError, match="Reached limit of 2"):
                    session.run(step)
                results.append((values, int(session.run(counter))))
    assert results[0] == results[1] == ([0, 1], 2)
