"""Reading TFRecord files: CRC-32C speed, and records read per second, tensorgrid vs TensorFlow.

Two measurements, each the median of ``--repeats`` runs, the cases interleaved:

- ``crc``: MB/s of the checksum alone over a 4 MB buffer: tensorgrid's CRC-32C as
  installed (google-crc32c's C code) and the pure-Python fallback;
- ``read``: MB/s of ``tf.io.tf_record_iterator`` over a file of ``--megabytes`` MB of
  1 KiB records (every record's two checksums checked): tensorgrid with the C CRC, with
  the Python fallback (over an eighth of the file: it is slow), and TensorFlow 2.21.

    .venv/bin/python bench/tfrecord_read.py [--megabytes 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time
from typing import Any, Callable

import numpy as np

from tensorgrid.kernels import tf_record

RECORD = 1024
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "tfrecord_read.json"


def megabytes_per_second(run: Callable[[], int]) -> float:
    started = time.perf_counter()
    size = run()
    return size / (time.perf_counter() - started) / 1e6


def with_python_crc(run: Callable[[], int]) -> Callable[[], int]:
    def fallback() -> int:
        chosen = tf_record.CRC32C_IMPLEMENTATION
        tf_record.CRC32C_IMPLEMENTATION = "python"
        try:
            return run()
        finally:
            tf_record.CRC32C_IMPLEMENTATION = chosen
    return fallback


def checksum_of(data: bytes) -> Callable[[], int]:
    def run() -> int:
        tf_record.crc32c(data)
        return len(data)
    return run


def read_all(iterate: Callable[[str], Any], path: str) -> Callable[[], int]:
    return lambda: sum(len(record) for record in iterate(path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf1

    import tensorgrid as tg

    rng = np.random.default_rng(0)
    buffer = rng.integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    records = [rng.integers(0, 256, RECORD, dtype=np.uint8).tobytes() for _ in range(256)]
    with tempfile.TemporaryDirectory() as tmp:
        full, eighth = os.path.join(tmp, "full.tfrecord"), os.path.join(tmp, "eighth.tfrecord")
        for path, megabytes in ((full, args.megabytes), (eighth, max(1, args.megabytes // 8))):
            with tg.io.TFRecordWriter(path) as writer:
                for i in range(megabytes * 1024):
                    writer.write(records[i % len(records)])
        cases: dict[str, Callable[[], int]] = {
            "crc tensorgrid (google-crc32c)": checksum_of(buffer),
            "crc tensorgrid (Python fallback)": with_python_crc(checksum_of(buffer)),
            "read tensorgrid (google-crc32c)": read_all(tg.io.tf_record_iterator, full),
            "read tensorgrid (Python fallback)": with_python_crc(read_all(tg.io.tf_record_iterator, eighth)),
            "read TensorFlow 2.21": read_all(tf1.io.tf_record_iterator, full),
        }
        runs: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, run in cases.items():
                runs[name].append(megabytes_per_second(run))
    medians = {name: statistics.median(values) for name, values in runs.items()}
    print(f"MB/s (median of {args.repeats}; {RECORD}-byte records, {args.megabytes} MB file)")
    for name, value in medians.items():
        print(f"{name:36s} {value:10.1f}")
    print(f"{'read: tensorgrid (C) / TensorFlow':36s} {medians['read tensorgrid (google-crc32c)'] / medians['read TensorFlow 2.21']:10.2f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"megabytes": args.megabytes, "record_bytes": RECORD, "repeats": args.repeats,
                                   "crc_implementation": tf_record.CRC32C_IMPLEMENTATION,
                                   "mb_per_s": medians, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
