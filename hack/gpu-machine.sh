#!/usr/bin/env bash
# The GPU checks of issue 32, as one script for a GPU machine lent for minutes (the workplace's
# `device` tool runs it in a copy of the checkout; results go to $OUT). It installs what that
# machine lacks from wheels carried in .whl/ (grpcio, protobuf, cryptography, cffi, pycparser,
# google-crc32c, py-spy: `pip download` them for cp312 manylinux, see ../shared/ENVIRONMENT.md),
# then runs, each part under its own time limit so one stuck part leaves the others' results:
#   smoke  the GPU seen by `tensorgrid devices`, bench/gpu.py's single-process part at two sizes,
#          a py-spy profile of tensorgrid's H=512 step, the GPU staging and distributed-training tests
#   full   bench/gpu.py (every part), then the runtime's whole suite (tests/runtime) with the GPU visible
# Usage (there): hack/gpu-machine.sh smoke|full [SECONDS_FOR_THE_SUITE]
set -uo pipefail
mode=${1:?usage: hack/gpu-machine.sh smoke|full [seconds for the suite]}
suite_seconds=${2:-300}
OUT=${OUT:?OUT must name the folder for the results}
started=$(date +%s)
say() { echo "[gpu-machine $(( $(date +%s) - started ))s] $*" | tee -a "$OUT/steps.log"; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { say "installing the carried wheels failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/runtime:$PWD/operator PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
nvidia-smi -L >"$OUT/steps.log" 2>&1
say "python $(python3 -c 'import sys, numpy, cupy, grpc; print(sys.version.split()[0], "numpy", numpy.__version__, "cupy", cupy.__version__, "grpcio", grpc.__version__)' 2>&1)"
timeout 60 python3 -m tensorgrid devices >>"$OUT/steps.log" 2>&1 || say "tensorgrid devices failed ($?)"

case "$mode" in
smoke)
  say "bench/gpu.py single, h512 and h2048"
  timeout 150 python3 bench/gpu.py --parts single,copies --sizes h512,h2048 --repeats 1 --duration 2 \
    --output "$OUT/gpu-smoke.json" >>"$OUT/steps.log" 2>&1 || say "bench failed or timed out ($?)"
  say "py-spy of tensorgrid's H=512 step"
  timeout 60 py-spy record --format raw --rate 200 -o "$OUT/spy-h512.txt" -- \
    python3 bench/gpu.py --parts single --sizes h512 --variants tensorgrid --repeats 1 --duration 8 --output '' \
    >>"$OUT/steps.log" 2>&1 || say "py-spy failed or timed out ($?)"
  say "tests: GPU staging, distributed training"
  timeout 150 python3 -m pytest -v -p no:cacheprovider -m "not oracle" tests/runtime/execution/test_gpu_staging.py \
    tests/runtime/distributed/test_distributed_training.py tests/runtime/ops/test_backends.py >"$OUT/tests-smoke.log" 2>&1
  say "tests ended ($?): $(tail -1 "$OUT/tests-smoke.log")"
  ;;
full)
  say "bench/gpu.py, every part"
  timeout 230 python3 bench/gpu.py --repeats 3 --duration 2.5 --output "$OUT/gpu.json" >>"$OUT/steps.log" 2>&1 \
    || say "bench failed or timed out ($?)"
  if [ -d .before/runtime ]; then  # an earlier tree of the runtime, copied there: its figures beside these
    say "bench/gpu.py single, tensorgrid of .before/runtime"
    PYTHONPATH=/tmp/site:$PWD/.before/runtime timeout 50 python3 bench/gpu.py --parts single --variants tensorgrid \
      --sizes h512,h2048 --repeats 2 --duration 2.5 --output "$OUT/gpu-before.json" >>"$OUT/steps.log" 2>&1 \
      || say "bench of .before failed or timed out ($?)"
  fi
  say "py-spy of tensorgrid's H=512 step"
  timeout 30 py-spy record --format raw --rate 200 -o "$OUT/spy-h512.txt" -- python3 bench/gpu.py --parts single \
    --sizes h512 --variants tensorgrid --repeats 1 --duration 6 --output '' >/dev/null 2>&1 || say "py-spy: $?"
  say "the runtime's suite, ${suite_seconds}s at most"
  timeout "$suite_seconds" python3 -m pytest -v -p no:cacheprovider -n 14 -m "not oracle" tests/runtime \
    --junitxml="$OUT/suite.xml" >"$OUT/suite.log" 2>&1
  say "suite ended ($?): $(tail -1 "$OUT/suite.log")"
  ;;
*) say "unknown mode $mode (valid: smoke, full)"; exit 2 ;;
esac
say "done"
