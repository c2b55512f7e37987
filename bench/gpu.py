"""GPU benchmark: tensorgrid's GPU tasks beside PyTorch on the same GPU, in one run.

Three parts (``--parts``, default all):

``single``: the MLP 784-H-...-H-10 (ReLU, softmax cross-entropy, plain SGD) trained in one
process with a host feed each step (a numpy batch of images and labels goes to the device
every step, as a ``feed_dict`` does), on four sizes: H=512 and H=2048 at batch 64,
H=4096 at batch 512, three layers of 8192 at batch 1024. Variants, interleaved in each
repeat (the order rotates): ``tensorgrid`` (a ``Session`` on the GPU: ops without a device
go to ``/device:GPU:0``), ``torch-eager`` (PyTorch, the same model, ``.cuda()`` of the batch
each step) and ``torch-graph`` (PyTorch replaying one CUDA graph of the whole step, the
batch copied into its static inputs: the replayed step the issue's 2x target is set
against). A variant runs ``--duration`` seconds of steps after its warm-up and is timed up
to a device synchronisation, so queued kernels are counted. Reported: the median steps/s
over repeats, and tensorgrid / PyTorch eager.

``distributed``: bench/training.py's between-graph cluster (1 PS, 2 workers, async, batch
64, plaintext) at H=2048 in three layouts on the one machine: a CPU PS and two GPU workers
(``CUDA_VISIBLE_DEVICES=`` on the PS, the usual layout), every task on the GPU, and every
task on the CPU (for reference). Reported: worker steps/s, the bytes a worker moves per step
(every variable read and every gradient sent) and the wire rate that makes, beside the
staging time those bytes cost at the measured copy bandwidth (so: bound by the wire or by
staging).

``copies``: the bandwidth of the copies a GPU task makes: device to host through
``BufferPool.stage`` (a pooled pinned buffer, reused), host to device from pinned and from
pageable memory, at 1, 16 and 64 MB.

    python bench/gpu.py                                  # everything; JSON in bench/results/gpu.json
    python bench/gpu.py --parts single --sizes h512 --variants tensorgrid --duration 10

Without a GPU (or without cupy) tensorgrid runs on the CPU and says so; without PyTorch the
PyTorch variants are left out and say so. Figures: bench/README.md, docs/limits.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Any, Callable, Optional

import numpy as np

INPUT = 784
CLASSES = 10
LEARNING_RATE = 0.01
DATA_BATCHES = 8
WARMUP_STEPS = 20
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "gpu.json"


@dataclasses.dataclass(frozen=True)
class Size:
    name: str
    hidden: int
    layers: int
    batch: int

    def describe(self) -> str:
        return f"784-{'-'.join([str(self.hidden)] * self.layers)}-10, batch {self.batch}"


SIZES = {size.name: size for size in (
    Size("h512", 512, 2, 64),
    Size("h2048", 2048, 2, 64),
    Size("h4096", 4096, 2, 512),
    Size("h8192x3", 8192, 3, 1024),
)}
VARIANTS = ("tensorgrid", "torch-eager", "torch-graph")


def _cupy() -> Any:
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # noqa: BLE001 - no cupy, no driver or no device: the CPU then
        return None


def _torch() -> Any:
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - no PyTorch or no CUDA for it: its variants are left out
        return None


def _data(size: Size) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    images = rng.standard_normal((DATA_BATCHES, size.batch, INPUT), dtype=np.float32)
    labels = rng.integers(0, CLASSES, (DATA_BATCHES, size.batch), dtype=np.int64)
    return images, labels


# ----------------------------------------------------------------------------- single process

def tensorgrid_step(size: Size) -> tuple[Callable[[int], None], Callable[[], None], str]:
    """A step function of tensorgrid's Session (fed from host numpy each step), a synchronise
    function, and the device the ops ran on."""
    import tensorgrid as tf

    images, labels = _data(size)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, INPUT])
        y = tf.placeholder(tf.int64, [None])
        layer = x
        for i, units in enumerate([size.hidden] * size.layers + [CLASSES]):
            fan_in = int(layer.shape[1])
            w = tf.get_variable(f"w{i}", [fan_in, units], initializer=tf.truncated_normal_initializer(
                stddev=float(np.sqrt(2.0 / fan_in)), seed=i + 1))
            b = tf.get_variable(f"b{i}", [units], initializer=tf.zeros_initializer())
            layer = tf.matmul(layer, w) + b
            if units != CLASSES:
                layer = tf.nn.relu(layer)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=layer))
        train = tf.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        init = tf.global_variables_initializer()
    session = tf.Session(graph=graph)
    session.run(init)
    cupy = _cupy()
    device = "GPU:0" if cupy is not None else "CPU (no GPU visible)"
    if cupy is not None:
        before = cupy.get_default_memory_pool().used_bytes()
        session.run(train, feed_dict={x: images[0], y: labels[0]})
        if cupy.get_default_memory_pool().used_bytes() <= 0 and before <= 0:
            device = "CPU (cupy present, but nothing was allocated on the GPU)"

    def step(i: int) -> None:
        session.run(train, feed_dict={x: images[i % DATA_BATCHES], y: labels[i % DATA_BATCHES]})

    def synchronize() -> None:
        if cupy is not None:
            cupy.cuda.runtime.deviceSynchronize()

    return step, synchronize, device


def torch_step(size: Size, replay: bool) -> tuple[Callable[[int], None], Callable[[], None], str]:
    torch = _torch()
    images, labels = _data(size)
    layers: list[Any] = []
    fan_in = INPUT
    for _ in range(size.layers):
        layers += [torch.nn.Linear(fan_in, size.hidden), torch.nn.ReLU()]
        fan_in = size.hidden
    model = torch.nn.Sequential(*layers, torch.nn.Linear(fan_in, CLASSES)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    host_images = [torch.from_numpy(images[i]) for i in range(DATA_BATCHES)]
    host_labels = [torch.from_numpy(labels[i]) for i in range(DATA_BATCHES)]

    def eager(i: int) -> None:
        xb = host_images[i % DATA_BATCHES].cuda()
        yb = host_labels[i % DATA_BATCHES].cuda()
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()

    if not replay:
        return eager, torch.cuda.synchronize, "cuda:0"
    static_x = host_images[0].cuda()
    static_y = host_labels[0].cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as CUDA graph capture needs
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(static_x), static_y).backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        torch.nn.functional.cross_entropy(model(static_x), static_y).backward()
        optimizer.step()

    def replayed(i: int) -> None:
        static_x.copy_(host_images[i % DATA_BATCHES])
        static_y.copy_(host_labels[i % DATA_BATCHES])
        graph.replay()

    return replayed, torch.cuda.synchronize, "cuda:0 (CUDA graph)"


def timed(step: Callable[[int], None], synchronize: Callable[[], None], duration: float) -> float:
    """Steps/s over at least ``duration`` seconds, after the warm-up, up to a synchronisation."""
    for i in range(WARMUP_STEPS):
        step(i)
    synchronize()
    started = time.perf_counter()
    steps = 0
    while True:
        step(steps)
        steps += 1
        if steps % 10 == 0 and time.perf_counter() - started >= duration:
            break
    synchronize()
    return steps / (time.perf_counter() - started)


def run_single(sizes: list[Size], variants: list[str], repeats: int, duration: float) -> dict[str, Any]:
    available = [v for v in variants if v == "tensorgrid" or _torch() is not None]
    left_out = {v: "PyTorch with CUDA is not importable here" for v in variants if v not in available}
    results: list[dict[str, Any]] = []
    for size in sizes:
        steps: dict[str, tuple[Callable[[int], None], Callable[[], None], str]] = {}
        for variant in available:
            steps[variant] = (tensorgrid_step(size) if variant == "tensorgrid"
                              else torch_step(size, replay=variant == "torch-graph"))
        rates: dict[str, list[float]] = {variant: [] for variant in available}
        for repeat in range(repeats):
            order = available[repeat % len(available):] + available[:repeat % len(available)]
            for variant in order:
                step, synchronize, _ = steps[variant]
                rates[variant].append(timed(step, synchronize, duration))
                print(f"  single {size.name} {variant} run {repeat + 1}: {rates[variant][-1]:.1f} steps/s",
                      file=sys.stderr, flush=True)
        medians = {variant: statistics.median(values) for variant, values in rates.items()}
        result: dict[str, Any] = {"size": size.name, "model": size.describe(),
                                  "devices": {variant: steps[variant][2] for variant in available},
                                  "steps_per_s": medians, "runs": rates}
        if "torch-eager" in medians and "tensorgrid" in medians:
            result["tensorgrid_vs_torch_eager"] = medians["tensorgrid"] / medians["torch-eager"]
        if "torch-graph" in medians and "tensorgrid" in medians:
            result["tensorgrid_vs_torch_graph"] = medians["tensorgrid"] / medians["torch-graph"]
        results.append(result)
        steps.clear()
    return {"sizes": results, "left_out": left_out}


# ----------------------------------------------------------------------------- copies

def run_copies(repeats: int) -> dict[str, Any]:
    """Copy bandwidth of a GPU task's staging (device to host into pooled pinned buffers) and
    of host-to-device copies; on a machine without a GPU, says so."""
    cupy = _cupy()
    if cupy is None:
        return {"left_out": "no GPU visible (cupy with a CUDA device)"}
    from tensorgrid.distributed.rpc.transport import buffers
    from tensorgrid.kernels import backend as backend_lib

    device = backend_lib.for_device("GPU", 0)
    pool = buffers.BufferPool(capacity_bytes=1 << 30)
    rows = []
    for megabytes in (1, 16, 64):
        nbytes = megabytes << 20
        on_device = device.asarray(np.arange(nbytes // 4, dtype=np.float32))
        pageable = np.ones(nbytes // 4, np.float32)
        pinned = device.host_buffer(nbytes).view(np.float32)
        pinned[:] = 1.0
        figures: dict[str, list[float]] = {"device_to_host_staged": [], "host_to_device_pinned": [],
                                           "host_to_device_pageable": []}
        pool.stage(on_device)  # the first allocates its pinned buffer; later ones reuse it
        for _ in range(repeats):
            for name, copy in (("device_to_host_staged", lambda: pool.stage(on_device)),
                               ("host_to_device_pinned", lambda: device.asarray(pinned)),
                               ("host_to_device_pageable", lambda: device.asarray(pageable))):
                cupy.cuda.runtime.deviceSynchronize()
                started = time.perf_counter()
                for _ in range(10):
                    copy()
                cupy.cuda.runtime.deviceSynchronize()
                figures[name].append(10 * nbytes / (time.perf_counter() - started) / 1e9)
        rows.append({"megabytes": megabytes, **{name: statistics.median(v) for name, v in figures.items()}})
    return {"gb_per_s": rows, "staging_allocations": pool.staging_allocations, "staged": pool.staged}


# ----------------------------------------------------------------------------- distributed

LAYOUTS = {
    "cpu-ps+gpu-workers": {"ps": {"CUDA_VISIBLE_DEVICES": ""}},
    "gpu-ps+gpu-workers": {},
    "all-cpu": {"ps": {"CUDA_VISIBLE_DEVICES": ""}, "worker": {"CUDA_VISIBLE_DEVICES": ""}},
}


def run_distributed(hidden: int, repeats: int, duration: float, copies: Optional[dict[str, Any]]) -> dict[str, Any]:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import training

    case = dataclasses.replace(training.CASES["base"], name=f"h{hidden}", hidden=hidden)
    if _cupy() is None:
        layouts = ["all-cpu"]
    else:
        layouts = list(LAYOUTS)
    runs: dict[str, list[float]] = {layout: [] for layout in layouts}
    for repeat in range(repeats):
        order = layouts[repeat % len(layouts):] + layouts[:repeat % len(layouts)]
        for layout in order:
            result = training.run_case(case, "tensorgrid", duration, keep_openblas_env=False, tls=False,
                                       job_env=LAYOUTS[layout])
            runs[layout].append(result["worker_steps_per_s"])
            print(f"  distributed {layout} run {repeat + 1}: {runs[layout][-1]:.1f} worker steps/s",
                  file=sys.stderr, flush=True)
    parameters = INPUT * hidden + hidden + hidden * hidden + hidden + hidden * CLASSES + CLASSES
    bytes_per_step = 2 * 4 * parameters  # every variable read, every gradient sent, float32
    rows = []
    staging_bw = _staging_gb_per_s(copies)
    for layout, values in runs.items():
        rate = statistics.median(values)
        row: dict[str, Any] = {"layout": layout, "worker_steps_per_s": rate, "runs": values,
                               "wire_mb_per_s": rate * bytes_per_step / 1e6,
                               "step_ms": 2 / rate * 1e3}  # two workers: each one's step
        if staging_bw and layout != "all-cpu":
            down, up = staging_bw
            # A GPU worker stages its gradients (device to host) and copies the variables it
            # read to the device (host to device); a GPU PS the reverse, the same bytes.
            copies_per_step = bytes_per_step / 2 / (down * 1e9) + bytes_per_step / 2 / (up * 1e9)
            row["staging_ms_per_worker_step"] = copies_per_step * 1e3
            row["staging_share_of_step"] = copies_per_step * 1e3 / row["step_ms"]
        rows.append(row)
    return {"model": f"784-{hidden}-{hidden}-10, batch {training.BATCH}, 1 ps, 2 workers, async, plaintext",
            "bytes_per_worker_step": bytes_per_step, "layouts": rows}


def _staging_gb_per_s(copies: Optional[dict[str, Any]]) -> Optional[tuple[float, float]]:
    if not copies or "gb_per_s" not in copies:
        return None
    largest = copies["gb_per_s"][-1]
    # A task with a GPU receives into pinned buffers (transport/buffers.py): the pinned rate.
    return largest["device_to_host_staged"], largest["host_to_device_pinned"]


# ----------------------------------------------------------------------------- report

def table(report: dict[str, Any]) -> str:
    lines = [f"GPU: {report['machine']['gpu']}"]
    single = report.get("single")
    if single:
        lines.append("single process, host feed each step (median steps/s):")
        for row in single["sizes"]:
            rates = ", ".join(f"{v} {r:.0f}" for v, r in row["steps_per_s"].items())
            ratio = row.get("tensorgrid_vs_torch_eager")
            lines.append(f"  {row['size']:8} {row['model']:36} {rates}"
                         + (f"  tensorgrid/eager {ratio:.2f}" if ratio else ""))
        for variant, why in single["left_out"].items():
            lines.append(f"  {variant} left out: {why}")
    copies = report.get("copies")
    if copies:
        if "gb_per_s" in copies:
            lines.append("copies (GB/s):")
            for row in copies["gb_per_s"]:
                lines.append(f"  {row['megabytes']:3} MB: staged D2H {row['device_to_host_staged']:.1f}, "
                             f"H2D pinned {row['host_to_device_pinned']:.1f}, "
                             f"H2D pageable {row['host_to_device_pageable']:.1f}")
        else:
            lines.append(f"copies left out: {copies['left_out']}")
    distributed = report.get("distributed")
    if distributed:
        lines.append(f"distributed ({distributed['model']}):")
        for row in distributed["layouts"]:
            staging = (f", staging {row['staging_ms_per_worker_step']:.2f} ms of a {row['step_ms']:.1f} ms step"
                       if "staging_ms_per_worker_step" in row else "")
            lines.append(f"  {row['layout']:20} {row['worker_steps_per_s']:.1f} worker steps/s, "
                         f"wire {row['wire_mb_per_s']:.0f} MB/s{staging}")
    return "\n".join(lines)


def _gpu_name() -> str:
    cupy = _cupy()
    if cupy is None:
        return "none visible"
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="single,copies,distributed", help="comma-separated: single, copies, distributed")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, from {', '.join(SIZES)}")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each variant (default 3)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of each timed run (default 3)")
    parser.add_argument("--hidden", type=int, default=2048, help="H of the distributed part (default 2048)")
    parser.add_argument("--output", default=str(RESULTS), help="where to save the JSON report ('' to skip)")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    for name, chosen, valid in (("--parts", parts, ("single", "copies", "distributed")),
                                ("--sizes", args.sizes.split(","), tuple(SIZES)),
                                ("--variants", args.variants.split(","), VARIANTS)):
        unknown = [c for c in chosen if c not in valid]
        if unknown:
            parser.error(f"{name}: unknown {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")
    report: dict[str, Any] = {"benchmark": "gpu", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                          "gpu": _gpu_name()},
                              "settings": {"repeats": args.repeats, "duration_s": args.duration,
                                           "warmup_steps": WARMUP_STEPS, "learning_rate": LEARNING_RATE}}
    if "single" in parts:
        report["single"] = run_single([SIZES[s] for s in args.sizes.split(",")], args.variants.split(","),
                                      args.repeats, args.duration)
    if "copies" in parts or "distributed" in parts:
        report["copies"] = run_copies(args.repeats)
    if "distributed" in parts:
        report["distributed"] = run_distributed(args.hidden, max(1, args.repeats - 1), args.duration,
                                                report["copies"])
    if args.output:
        pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output).write_text(json.dumps(report, indent=2))
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
