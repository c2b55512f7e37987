"""Runs one fuzz target of ``targets.py``: with atheris (libFuzzer, coverage-guided) when
it is installed, else (or with ``TENSORGRID_FUZZ_DRIVER=random``) with a seeded random
mutator over the same seeds.

    python tests/runtime/support/fuzz/run.py TARGET [-runs=N] [-max_total_time=S] [-seed=K]

Both drivers start from ``targets.seeds(TARGET)``, stop after ``-runs`` inputs or
``-max_total_time`` seconds, and exit non-zero with the input and its traceback when an
input escapes (``targets.EscapedInputError``, or any exception). ``make fuzz`` runs every target
for minutes; ``tests/runtime/distributed/test_fuzz.py`` runs each for a bounded number of inputs.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import atheris
except ImportError:  # the fallback below drives the same targets
    atheris = None

if os.environ.get("TENSORGRID_FUZZ_DRIVER") == "random":
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["tensorgrid.distributed", "google.protobuf"]):
        import targets
else:
    import targets

INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0xFFFFFFFF, 2**62, 2**63 - 1]


def _options(argv: list[str]) -> dict[str, int]:
    options = {"runs": 1000, "max_total_time": 0, "seed": 1, "rss_limit_mb": 0}
    for arg in argv:
        name, _, value = arg.lstrip("-").partition("=")
        if name in options:
            options[name] = int(value)
    return options


def _mutate(data: bytes, rng: random.Random, corpus: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(6)
        position = rng.randrange(len(out) + 1)
        if choice == 0 and out:
            out[min(position, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1:
            out[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif choice == 2 and out:
            del out[position:position + rng.randint(1, 16)]
        elif choice == 3:
            width = rng.choice((1, 4, 8))
            value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
            out[position:position + width] = value.to_bytes(width, "little")
        elif choice == 4:
            other = rng.choice(corpus)
            start = rng.randrange(len(other) + 1)
            out[position:] = other[start:start + rng.randint(1, 64)] + out[position:]
        else:
            out = out[:position]
    return bytes(out)


def run_fallback(target: str, argv: list[str]) -> int:
    """Seeded random mutation of the seeds (no coverage guidance)."""
    options = _options(argv)
    rng = random.Random(options["seed"])
    test = targets.TARGETS[target]
    corpus = targets.seeds(target)
    deadline = time.monotonic() + options["max_total_time"] if options["max_total_time"] else None
    runs = 0
    while (deadline is None and runs < options["runs"]) or (deadline is not None and time.monotonic() < deadline):
        data = corpus[runs] if runs < len(corpus) else _mutate(rng.choice(corpus), rng, corpus)
        try:
            test(data)
        except Exception:  # noqa: BLE001 - the finding, reported with its input
            print(f"fuzz target {target}: input {data!r} escaped:\n{traceback.format_exc()}", file=sys.stderr)
            return 1
        if runs >= len(corpus) and rng.random() < 0.05 and len(corpus) < 512:
            corpus.append(data)
        runs += 1
    print(f"fuzz target {target}: {runs} inputs, none escaped (seeded random mutation)")
    return 0


def run_atheris(target: str, argv: list[str]) -> None:
    test = targets.TARGETS[target]
    # atheris.Fuzz() ends the process itself, so nothing here is cleaned up: the run's corpus
    # and any finding (crash-*, oom-*, timeout-*, which libFuzzer otherwise writes into the
    # working directory, the checkout) go to one directory under the system's temporary one.
    workdir = tempfile.mkdtemp(prefix=f"fuzz-{target}-")
    corpus = os.path.join(workdir, "corpus")
    os.mkdir(corpus)
    for i, seed in enumerate(targets.seeds(target)):
        with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
            f.write(seed)
    if not any(arg.startswith("-artifact_prefix=") for arg in argv):
        argv = [*argv, f"-artifact_prefix={workdir}/"]
    print(f"fuzz target {target}: corpus and findings in {workdir}", file=sys.stderr)
    atheris.Setup([sys.argv[0], *argv, corpus], test)
    atheris.Fuzz()


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        print(f"usage: {sys.argv[0]} TARGET [-runs=N] [-max_total_time=S] [-seed=K]; targets: "
              f"{', '.join(targets.TARGETS)}", file=sys.stderr)
        return 2
    target, argv = sys.argv[1], sys.argv[2:]
    if atheris is None:
        return run_fallback(target, argv)
    run_atheris(target, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
