"""Training steps of the embedding models parameter servers exist for, tensorgrid vs TensorFlow.

Two models, each built the same way on both libraries:

- ``wide_deep``: the click model of ``examples/wide_deep_click.py`` (a ``--rows`` x 64
  embedding table and a ``--rows`` x 1 wide table, each ``fixed_size_partitioner(2)``, 4 ids
  per example drawn with a heavy head, a 256-64-1 deep network, a wide
  ``embedding_lookup_sparse``, Adagrad), batch 256;
- ``wide_deep_ftrl``: ``wide_deep`` with FTRL on the wide table and Adagrad on the rest, as
  TF1's canned wide-and-deep model trains (issue 26's third case);
- ``dlrm_like``: 26 categorical features, each with its own 16-wide table (sizes spaced
  geometrically from 1,000 to ``--rows`` rows; tables of 100,000 rows or more are
  ``fixed_size_partitioner(2)``), 13 dense features through a 13-64-16 bottom MLP, the 27
  vectors concatenated into a 256-1 top MLP, Adagrad, batch 512.

Case ``inprocess``: one ``tf.Session`` in one process trains the model; each run is a fresh
child process that draws its batches first (16, cycled), runs 20 warm-up steps, then times
``--steps`` steps. Each library runs twice: with the session's default threads
(``default``) and with ``ConfigProto(intra_op_parallelism_threads=1,
inter_op_parallelism_threads=1)`` (``1thread``). Runs are interleaved (every library and
thread setting once per repeat, in a rotating order); reported are the median and
min-max over ``--repeats`` runs of the mean ms per step, and tensorgrid / TensorFlow as the
ratio of TensorFlow's best median to tensorgrid's best median (above 1: tensorgrid faster).
``--background-load`` runs a busy loop pinned to one core for the whole benchmark (a
machine with one core taken by another process).

Case ``distributed`` (``--case distributed``): the same models on 2 PS and 2 async workers,
every task a process on 127.0.0.1, tensorgrid with mutual TLS and in plaintext beside
TensorFlow at its default and at one thread, one common measuring window
(``bench/sparse_cluster.py`` says how).

    .venv/bin/python bench/sparse_training.py                        # both models; JSON in bench/results/sparse_training.json
    .venv/bin/python bench/sparse_training.py --models wide_deep --repeats 5 --background-load
    .venv/bin/python bench/sparse_training.py --case distributed --repeats 5 [--tcp]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "examples"))
sys.path.insert(0, str(BENCH))

import sparse_cluster  # the distributed case

RESULTS = BENCH / "results" / "sparse_training.json"
BACKENDS = ("tensorgrid", "tensorflow")
THREADS = ("default", "1thread")
MODELS = ("wide_deep", "wide_deep_ftrl", "dlrm_like")
DATA_BATCHES = 16
WARMUP_STEPS = 20
LEARNING_RATE = 0.05

DLRM_FEATURES = 26
DLRM_DENSE = 13
DLRM_DIM = 16
DLRM_BATCH = 512
DLRM_PARTITIONED_FROM = 100_000


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


# ----------------------------------------------------------------------------- the models

def dlrm_table_sizes(largest: int) -> list[int]:
    """26 table sizes spaced geometrically from 1,000 to ``largest`` rows."""
    return [int(round(size)) for size in np.geomspace(1000, largest, DLRM_FEATURES)]


def dense_layer(tf: Any, inputs: Any, units: int, name: str, seed: int, relu: bool) -> Any:
    fan_in = int(inputs.shape[1])
    weights = tf.get_variable(f"{name}/weights", [fan_in, units], initializer=tf.random_normal_initializer(
        stddev=float(np.sqrt(2.0 / fan_in)), seed=seed))
    biases = tf.get_variable(f"{name}/biases", [units], initializer=tf.zeros_initializer())
    outputs = tf.matmul(inputs, weights) + biases
    return tf.nn.relu(outputs) if relu else outputs


def build_dlrm(tf: Any, largest: int) -> tuple[list[Any], Any]:
    """The feeds (categorical ids [batch, 26], dense [batch, 13], clicks [batch, 1]) and loss."""
    ids = tf.placeholder(tf.int64, [None, DLRM_FEATURES], name="ids")
    dense = tf.placeholder(tf.float32, [None, DLRM_DENSE], name="dense")
    clicks = tf.placeholder(tf.float32, [None, 1], name="clicks")
    bottom = dense_layer(tf, dense_layer(tf, dense, 64, "bottom0", 1, True), DLRM_DIM, "bottom1", 2, True)
    vectors = [bottom]
    for feature, rows in enumerate(dlrm_table_sizes(largest)):
        partitioner = tf.fixed_size_partitioner(2) if rows >= DLRM_PARTITIONED_FROM else None
        table = tf.get_variable(f"table{feature}", [rows, DLRM_DIM], partitioner=partitioner,
                                initializer=tf.random_normal_initializer(stddev=0.05, seed=10 + feature))
        vectors.append(tf.nn.embedding_lookup(table, ids[:, feature]))
    top = dense_layer(tf, tf.concat(vectors, 1), 256, "top0", 3, True)
    logits = dense_layer(tf, top, 1, "top1", 4, False)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=clicks, logits=logits))
    return [ids, dense, clicks], loss


def dlrm_batches(largest: int, count: int, stream: int = 0) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(stream)
    sizes = np.array(dlrm_table_sizes(largest))
    batches = []
    for _ in range(count):
        ids = (rng.random((DLRM_BATCH, DLRM_FEATURES)) ** 6 * sizes).astype(np.int64)
        dense = rng.normal(size=(DLRM_BATCH, DLRM_DENSE)).astype(np.float32)
        clicks = (rng.random((DLRM_BATCH, 1)) < 1.0 / (1.0 + np.exp(-dense[:, :1]))).astype(np.float32)
        batches.append((ids, dense, clicks))
    return batches


def build(tf: Any, model: str, rows: int, stream: int = 0) -> tuple[list[Any], Any, list[tuple[np.ndarray, ...]]]:
    """The model's feeds and loss, and ``DATA_BATCHES`` batches of data stream ``stream`` (a worker's)."""
    if model in ("wide_deep", "wide_deep_ftrl"):
        import wide_deep_click

        ids, cross, clicks, loss = wide_deep_click.build_model(tf, 0, vocabulary=rows)
        data = wide_deep_click.ClickData(0, stream=stream, vocabulary=rows)
        return [ids, cross, clicks], loss, [data.batch(256) for _ in range(DATA_BATCHES)]
    if model == "dlrm_like":
        feeds, loss = build_dlrm(tf, rows)
        return feeds, loss, dlrm_batches(rows, DATA_BATCHES, stream)
    raise ValueError(f"unknown model {model!r}: expected one of {MODELS}")


def train_op(tf: Any, model: str, loss: Any, global_step: Any = None) -> Any:
    """The model's training op: Adagrad on every variable, or for ``wide_deep_ftrl`` FTRL on the wide
    table (``wide_weights``) and Adagrad on the rest, the global step counted once."""
    if model != "wide_deep_ftrl":
        return tf.train.AdagradOptimizer(LEARNING_RATE).minimize(loss, global_step=global_step)
    trainable = tf.trainable_variables()
    wide = [v for v in trainable if v.op.name.startswith("wide_weights")]
    deep = [v for v in trainable if not v.op.name.startswith("wide_weights")]
    return tf.group(tf.train.FtrlOptimizer(LEARNING_RATE, l1_regularization_strength=0.001).minimize(loss, var_list=wide),
                    tf.train.AdagradOptimizer(LEARNING_RATE).minimize(loss, global_step=global_step, var_list=deep))


# ----------------------------------------------------------------------------- one run (a child process)

def run_inprocess(backend: str, model: str, threads: str, rows: int, steps: int) -> dict[str, Any]:
    tf = import_tf(backend)
    config = None
    if threads == "1thread":
        config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.Graph().as_default():
        feeds, loss, batches = build(tf, model, rows)
        step_op = train_op(tf, model, loss)
        nodes = len(tf.get_default_graph().get_operations())
        with tf.Session(config=config) as sess:
            sess.run(tf.global_variables_initializer())
            feed_dicts = [dict(zip(feeds, batch)) for batch in batches]
            for step in range(WARMUP_STEPS):
                sess.run(step_op, feed_dicts[step % DATA_BATCHES])
            started = time.perf_counter()
            cpu_started = time.process_time()
            for step in range(steps):
                sess.run(step_op, feed_dicts[step % DATA_BATCHES])
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            final_loss = float(sess.run(loss, feed_dicts[0]))
    return {"ms_per_step": elapsed / steps * 1000, "cpu_ms_per_step": cpu / steps * 1000, "nodes": nodes,
            "loss": final_loss}


# ----------------------------------------------------------------------------- the parent

def busy_loop() -> subprocess.Popen[bytes]:
    """A process spinning on core 0 until killed: another job's load on one core."""
    code = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def run_child(backend: str, model: str, threads: str, rows: int, steps: int) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, __file__, "--child", backend, model, threads, "--rows", str(rows),
               "--steps", str(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{backend} {model} {threads} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, results in runs.items():
        times = [r["ms_per_step"] for r in results]
        summary[name] = {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
                         "cpu_ms": statistics.median(r["cpu_ms_per_step"] for r in results),
                         "nodes": results[0]["nodes"], "loss": results[-1]["loss"]}
    best = {backend: min(v["median_ms"] for k, v in summary.items() if k.startswith(backend + " "))
            for backend in BACKENDS if any(k.startswith(backend + " ") for k in summary)}
    if len(best) == 2:
        summary["tensorgrid / best TF"] = best["tensorflow"] / best["tensorgrid"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--threads", nargs="+", choices=THREADS, default=list(THREADS))
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the largest table (default 1,000,000)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per run (default 200)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--background-load", action="store_true", help="a busy loop on one core throughout")
    parser.add_argument("--case", choices=("inprocess", "distributed"), default="inprocess")
    parser.add_argument("--variants", nargs="+", choices=sparse_cluster.VARIANTS, default=list(sparse_cluster.VARIANTS),
                        help="the distributed case's variants (default: all)")
    parser.add_argument("--duration", type=float, default=8.0, help="the distributed case's window, seconds (default 8)")
    parser.add_argument("--tcp", action="store_true",
                        help="distributed: tensorgrid's tensors over loopback TCP (as between machines), not Unix sockets")
    parser.add_argument("--child", nargs=3, metavar=("BACKEND", "MODEL", "THREADS"), help=argparse.SUPPRESS)
    parser.add_argument("--task", nargs=6, metavar=("VARIANT", "MODEL", "JOB", "INDEX", "CLUSTER", "RUN_DIR"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        backend, model, threads = args.child
        print(json.dumps(run_inprocess(backend, model, threads, args.rows, args.steps)))
        return 0
    if args.task:
        variant, model, job, index, cluster, run_dir = args.task
        return sparse_cluster.run_task(variant, model, args.rows, job, int(index), cluster, run_dir)
    if args.case == "distributed":
        return distributed(args)
    load = busy_loop() if args.background_load else None
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": sys.argv,
                              "load_average": os.getloadavg(), "background_load": args.background_load,
                              "rows": args.rows, "steps": args.steps, "repeats": args.repeats, "models": {}}
    try:
        for model in args.models:
            variants = [(b, t) for b in args.backends for t in args.threads]
            runs: dict[str, list[dict[str, Any]]] = {f"{b} {t}": [] for b, t in variants}
            for repeat in range(args.repeats):
                shift = repeat % len(variants)
                for backend, threads in variants[shift:] + variants[:shift]:
                    result = run_child(backend, model, threads, args.rows, args.steps)
                    runs[f"{backend} {threads}"].append(result)
                    print(f"{model} {backend} {threads}: {result['ms_per_step']:.2f} ms/step", file=sys.stderr)
            report["models"][model] = summarize(runs)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    print(f"ms per in-process step (median, min-max of {args.repeats} runs of {args.steps} steps)"
          f"{', one core busy' if args.background_load else ''}")
    for model, summary in report["models"].items():
        for name, value in summary.items():
            if isinstance(value, dict):
                print(f"{model:10s} {name:22s} {value['median_ms']:8.2f} ({value['min_ms']:.2f}-{value['max_ms']:.2f})"
                      f"  cpu {value['cpu_ms']:.2f}  nodes {value['nodes']}")
            else:
                print(f"{model:10s} {name:22s} {value:8.2f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def distributed(args: argparse.Namespace) -> int:
    load = busy_loop() if args.background_load else None
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": sys.argv,
                              "load_average_before": os.getloadavg(), "background_load": args.background_load,
                              "rows": args.rows, "duration_s": args.duration, "repeats": args.repeats,
                              "tcp": args.tcp, "models": {}}
    try:
        for model in args.models:
            report["models"][model] = sparse_cluster.measure(model, args.variants, args.rows, args.duration,
                                                             args.repeats, args.tcp)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    report["load_average_after"] = os.getloadavg()
    print(f"worker steps/s, 2 PS + 2 async workers (median, min-max of {args.repeats} runs of {args.duration:.0f} s)"
          f"{', tensors over TCP' if args.tcp else ''}{', one core busy' if args.background_load else ''}")
    for model, summary in report["models"].items():
        print(sparse_cluster.table(model, summary))
    RESULTS.parent.mkdir(exist_ok=True)
    (RESULTS.parent / "sparse_training_distributed.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from tensorgrid.distributed.rpc import certificates

    # tensorgrid's tasks talk mutual TLS, as users' do: a CA for this run, inherited by every task.
    with certificates.loopback_tls_for_this_process("tensorgrid sparse benchmark"):
        sys.exit(main())
