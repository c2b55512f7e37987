"""What mutual TLS costs a training: the base case of ``bench/training.py`` with and without it.

The same cluster (MLP 784-512-512-10, batch 64, 1 ps + 2 workers, async, every task a
process on 127.0.0.1) runs on tensorgrid with mutual TLS on gRPC and the data channel (the
default: a CA made for this run) and with ``TENSORGRID_INSECURE=1``, interleaved (TLS,
plaintext, plaintext, TLS, ...) so background load hits both alike. Reported: the median
over the runs of worker steps/s and global steps/s of each, and the ratio TLS / plaintext
of worker steps/s (of the medians, and the median of the paired runs). The target
(issue #13): at most 15% fewer steps/s, a ratio of at least 0.85.

    .venv/bin/python bench/tls_cost.py                 # 5 runs each; JSON also saved to bench/results/tls_cost.json
    .venv/bin/python bench/tls_cost.py --repeats 3 --duration 5
    .venv/bin/python bench/tls_cost.py --path tcp      # the data channel over TCP, as between machines

``--path`` picks how the tasks' data channels reach each other: ``unix`` (the default for tasks
on one machine: the Unix socket, which is never encrypted, so only gRPC pays TLS) or ``tcp``
(``TENSORGRID_DATA_CHANNEL_UNIX=0``: TCP on loopback, every payload encrypted, the path of
tasks on different machines, without a network's own latency).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import training  # the sibling benchmark: the base case, its cluster and measurement

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "tls_cost.json"
UNIX_SOCKETS_ENV = "TENSORGRID_DATA_CHANNEL_UNIX"
TARGET_RATIO = 0.85


def measure(repeats: int, duration: float, keep_openblas_env: bool, path: str = "unix") -> dict[str, Any]:
    case = training.CASES["base"]
    if path == "tcp":
        os.environ[UNIX_SOCKETS_ENV] = "0"  # the tasks inherit it (training.child_env)
    elif os.environ.get(UNIX_SOCKETS_ENV, "1").strip() == "0":
        raise SystemExit(f"--path unix with {UNIX_SOCKETS_ENV}=0 set: unset it, or use --path tcp")
    runs: dict[str, list[dict[str, Any]]] = {"tls": [], "plaintext": []}
    for repeat in range(repeats):
        order = ("tls", "plaintext") if repeat % 2 == 0 else ("plaintext", "tls")
        for mode in order:
            result = training.run_case(case, "tensorgrid", duration, keep_openblas_env, tls=mode == "tls")
            runs[mode].append(result)
            print(f"  {mode} run {repeat + 1}: {result['worker_steps_per_s']:.1f} worker steps/s, "
                  f"{result['global_steps_per_s']:.1f} global steps/s", file=sys.stderr, flush=True)
    medians = {mode: {key: statistics.median(r[key] for r in mine)
                      for key in ("worker_steps_per_s", "global_steps_per_s", "step_p50_ms")}
               for mode, mine in runs.items()}
    paired = [t["worker_steps_per_s"] / p["worker_steps_per_s"] for t, p in zip(runs["tls"], runs["plaintext"])]
    return {
        "benchmark": "tls_cost", "case": case.describe(), "data_channel_path": path, "repeats": repeats,
        "duration_s": duration,
        "medians": medians,
        "ratio_tls_vs_plaintext": {
            "of_medians": medians["tls"]["worker_steps_per_s"] / medians["plaintext"]["worker_steps_per_s"],
            "median_of_paired_runs": statistics.median(paired), "paired_runs": paired},
        "target_ratio": TARGET_RATIO,
        "runs": runs,
    }


def table(report: dict[str, Any]) -> str:
    ratio = report["ratio_tls_vs_plaintext"]
    lines = [f"{report['case']}, data channel over {report['data_channel_path']}, {report['repeats']} runs each "
             f"of {report['duration_s']:.0f} s",
             "| mode | worker steps/s | global steps/s | step p50 ms |", "|---|---|---|---|"]
    for mode, figures in report["medians"].items():
        lines.append(f"| {mode} | {figures['worker_steps_per_s']:.1f} | {figures['global_steps_per_s']:.1f} | "
                     f"{figures['step_p50_ms']:.2f} |")
    lines.append(f"TLS / plaintext: **{ratio['of_medians']:.3f}** (median of paired runs "
                 f"{ratio['median_of_paired_runs']:.3f}; target >= {TARGET_RATIO})")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per mode, interleaved (default 5)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds in each measuring window (default 8)")
    parser.add_argument("--keep-openblas-env", action="store_true",
                        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the benchmark's processes")
    parser.add_argument("--path", choices=("unix", "tcp"), default="unix",
                        help="the data channel between the tasks: unix (one machine's default) or tcp "
                             "(TLS on every payload, as between machines)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--output", default=str(RESULTS), help="where to save the JSON report ('' to skip)")
    args = parser.parse_args()
    report = measure(args.repeats, args.duration, args.keep_openblas_env, args.path)
    if args.output:
        pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    with training.certificates.loopback_tls_for_this_process("tensorgrid benchmark"):
        sys.exit(main())
