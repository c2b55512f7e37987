"""Time from `kubectl apply` of a TrainingJob to all of its pods Running, on the e2e kind cluster.

Applies the async example (1 PS + 2 workers) under a new name, one job at a time, and
reports each time and the median: what docs/operator.md quotes. Needs a cluster from
`make e2e-up`; leaves it as it found it.

    .venv/bin/python bench/kind_startup.py [--jobs 10]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "e2e"))

from cluster_support import example, kubectl

NAMESPACE = "bench-startup"


def _all_running(job: str, replicas: int) -> bool:
    out = kubectl("-n", NAMESPACE, "get", "pods", "-l", f"tensorgrid.io/job-name={job}", "-o",
                  "jsonpath={.items[*].status.phase}").stdout.split()
    return len(out) == replicas and all(phase == "Running" for phase in out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10)
    args = parser.parse_args()
    kubectl("create", "namespace", NAMESPACE, check=False)
    manifest = example("async", steps=100000)
    times = []
    try:
        for i in range(args.jobs):
            job = f"startup-{i}"
            text = manifest.replace("digits-async", job)
            started = time.monotonic()
            kubectl("-n", NAMESPACE, "apply", "-f", "-", stdin=text)
            while not _all_running(job, 3):
                if time.monotonic() - started > 300:
                    raise SystemExit(f"{job}: pods not running after 300 s")
                time.sleep(0.2)
            times.append(time.monotonic() - started)
            print(f"{job}: all 3 pods Running {times[-1]:.1f} s after kubectl apply", flush=True)
            kubectl("-n", NAMESPACE, "delete", "-f", "-", "--wait=true", stdin=text, timeout=300)
    finally:
        kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    print(json.dumps({"jobs": len(times), "median_s": round(statistics.median(times), 2),
                      "min_s": round(min(times), 2), "max_s": round(max(times), 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
