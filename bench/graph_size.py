"""What measuring a graph's size costs: ``graph_codec.serialized_size`` against serializing.

A session created in the task's own process, and a partition its master registers on
its own worker, are held to the byte limits of graphs (docs/limits.md, "Resource
bounds") like a remote client's, whose request carries its size. In-process there is no
request: the graph is measured as it would serialize, counting large constants by their
length instead of copying them. This prints, for a few graphs, the time of both ways and
how far apart their byte counts are.

    .venv/bin/python bench/graph_size.py [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import numpy as np

import tensorgrid as tf
from tensorgrid.distributed import graph_codec


def _mlp(hidden: int) -> Any:
    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, [None, 784])
        h = x
        for rows in (784, hidden):
            h = tf.nn.relu(tf.matmul(h, tf.Variable(np.random.rand(rows, hidden).astype(np.float32))))
        tf.train.AdamOptimizer(0.01).minimize(tf.reduce_sum(h))
    return graph.as_graph_def()


def _embedding(rows: int) -> Any:
    with tf.Graph().as_default() as graph:
        tf.Variable(np.zeros((rows, 64), np.float32))
    return graph.as_graph_def()


def _median_ms(call: Callable[[], int], repeats: int) -> tuple[float, int]:
    times, result = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        result = call()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    graphs = {"MLP 784-512-512, Adam": _mlp(512), "MLP 784-2048-2048, Adam": _mlp(2048),
              "1,000,000 x 64 float32 initial value": _embedding(1_000_000)}
    rows = []
    for name, graph_def in graphs.items():
        measured_ms, measured = _median_ms(lambda: graph_codec.serialized_size(graph_def), args.repeats)
        serialized_ms, exact = _median_ms(lambda: int(graph_codec.to_proto(graph_def).ByteSize()), args.repeats)
        rows.append({"graph": name, "nodes": len(graph_def.nodes), "bytes": exact, "off_by": exact - measured,
                     "serialized_size_ms": measured_ms, "to_proto_ms": serialized_ms,
                     "speedup": serialized_ms / measured_ms})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'graph':40} {'nodes':>6} {'bytes':>12} {'off by':>7} {'serialized_size ms':>19} {'to_proto ms':>12} "
          f"{'ratio':>8}")
    for r in rows:
        print(f"{r['graph']:40} {r['nodes']:6d} {r['bytes']:12d} {r['off_by']:7d} {r['serialized_size_ms']:19.3f} "
              f"{r['to_proto_ms']:12.1f} {r['speedup']:8.0f}")


if __name__ == "__main__":
    main()
