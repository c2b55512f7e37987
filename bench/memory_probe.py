"""Runs the operator and writes down where its memory is, each time its RSS reaches a new peak.

``bench/operator_scale.py --memory-profile DIR`` starts the operator through this module
instead of ``python -m tensorgrid_operator``. A thread reads the process's RSS every
second; each time it passed the last report by ``--step-mib``, it writes ``DIR/peak.txt``
again (and ``DIR/peak-<MiB>.txt`` beside it), so the last one is the peak:

- glibc's view (``mallinfo2``): bytes in use by malloc, free but kept in its arenas, and
  mmapped, so the gap between Python's objects and the RSS is plain;
- with ``--tracemalloc N``: Python's allocations by source line and by traceback (N
  frames; tracemalloc makes the operator slower and bigger, so compare its tables, not
  its RSS, with a run without it);
- the live objects by type (``gc``), with their count and shallow size.

Usage: ``python bench/memory_probe.py DIR [--tracemalloc 20] -- <the operator's arguments>``.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import importlib
import pathlib
import runpy
import sys
import threading
import time
import tracemalloc
from typing import Optional


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def rss_mib() -> float:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def malloc_lines() -> list[str]:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError) as e:
        return [f"mallinfo2 unavailable: {e}"]
    mib = 1024 * 1024
    return [f"malloc: in use {info.uordblks / mib:.1f} MiB (sbrk/arenas {info.arena / mib:.1f} MiB, "
            f"free in arenas {info.fordblks / mib:.1f} MiB), mmapped {info.hblkhd / mib:.1f} MiB in {info.hblks} "
            f"blocks"]


def object_lines(top: int) -> list[str]:
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        name = type(obj).__name__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    lines = [f"gc-tracked objects: {sum(counts.values())}, shallow {sum(sizes.values()) / 2**20:.1f} MiB "
             f"(str and bytes are not tracked)"]
    for name, size in sizes.most_common(top):
        lines.append(f"  {size / 2**20:8.1f} MiB {counts[name]:9d} {name}")
    return lines


def trace_lines(top: int) -> list[str]:
    if not tracemalloc.is_tracing():
        return []
    snapshot = tracemalloc.take_snapshot().filter_traces([
        tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")])
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"tracemalloc: {current / 2**20:.1f} MiB traced now, {peak / 2**20:.1f} MiB at most", "by line:"]
    for stat in snapshot.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        lines.append(f"  {stat.size / 2**20:8.1f} MiB {stat.count:9d} {frame.filename}:{frame.lineno}")
    lines.append("by traceback:")
    for stat in snapshot.statistics("traceback")[:top // 2]:
        lines.append(f"  {stat.size / 2**20:8.1f} MiB {stat.count:9d} blocks")
        lines.extend(f"      {line}" for line in stat.traceback.format(most_recent_first=True)[:2 * 12])
    return lines


def report(out: pathlib.Path, started: float) -> float:
    rss = rss_mib()
    lines = [f"rss {rss:.1f} MiB after {time.monotonic() - started:.0f} s", *malloc_lines(), *trace_lines(30),
             *object_lines(25)]
    text = "\n".join(lines) + "\n"
    (out / f"peak-{int(rss)}.txt").write_text(text)
    (out / "peak.txt").write_text(text)
    return rss


def watch(out: pathlib.Path, step_mib: float) -> None:
    started = time.monotonic()
    reported = 0.0
    while True:
        time.sleep(1.0)
        if rss_mib() >= reported + step_mib:
            reported = report(out, started)


def main(argv: Optional[list[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=pathlib.Path, help="folder for the reports")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                        help="trace Python's allocations with this many frames (0: off)")
    parser.add_argument("--step-mib", type=float, default=5.0, help="report again after RSS grew this much")
    ours = parser.parse_args(args[:split])
    ours.out.mkdir(parents=True, exist_ok=True)
    if ours.tracemalloc:
        # After the imports: traced, they take minutes on a busy machine, and are no part of the growth.
        importlib.import_module("tensorgrid_operator.controller.registrations")
        tracemalloc.start(ours.tracemalloc)
    threading.Thread(target=watch, args=(ours.out, ours.step_mib), daemon=True, name="memory-probe").start()
    sys.argv = ["tensorgrid_operator", *args[split + 1:]]
    runpy.run_module("tensorgrid_operator", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
