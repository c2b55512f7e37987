#!/usr/bin/env bash
# smoke-images.sh: run the images of `make images` for real (`make images-smoke`).
#
#   runtime          1 PS + 1 worker on a user-defined Docker network, containers
#                    tg-ps-0 (`tensorgrid server`, the image's entrypoint) and
#                    tg-worker-0 (examples/distributed_digits.py) finding each other
#                    by DNS through TF_CONFIG: the worker must exit 0 with a test
#                    accuracy line, the PS must become healthy (the image's
#                    HEALTHCHECK) and then exit 0 by itself when training ends;
#                    the tasks talk mutual TLS with certificates the image makes
#   runtime-sync     the same program synchronous (SyncReplicasOptimizer) with a
#                    chief, a worker and a PS, as examples/trainingjob-chief.yaml runs it
#   cuda             the CUDA variant ($CUDA_IMAGE: on NVIDIA's base, or on a stand-in
#                    base with TENSORGRID_OFFLINE_BASES=1) has cupy, finds no GPU in a
#                    container given none, and trains on numpy
#   operator         the operator image against a real control plane
#                    (hack/controlplane.sh, --network host, the kubeconfig mounted):
#                    /healthz and /metrics answer, the image's HEALTHCHECK turns
#                    healthy, and a TrainingJob gets its pods and Services
# Containers run as the chart runs the operator: read-only root file system, a
# tmpfs on /tmp, no capabilities, no privilege escalation.
#
# Usage: hack/smoke-images.sh [runtime|runtime-sync|cuda|operator ...]   (default: all)
# Environment: TENSORGRID_OFFLINE_BASES and names as in hack/images.env, as for the
# build (`make images-smoke` passes them on); BUILD_CUDA=0 leaves out the CUDA image;
# SMOKE_TIMEOUT (seconds per wait, default 420: at a load average of 12 the 1,500-step
# async training took 200 s; CI runs it beside `make test`).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=hack/images.env
source "$HERE/images.env"
TIMEOUT="${SMOKE_TIMEOUT:-420}"
NETWORK=tg-smoke
WORK="$REPO_ROOT/.cache/images-smoke"
HARDENED=(--read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges)

log() { printf '[smoke-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

targets=("$@")
if [[ ${#targets[@]} == 0 ]]; then
  targets=(runtime runtime-sync operator)
  [[ "${BUILD_CUDA:-1}" == 0 ]] || targets+=(cuda)
fi

DOCKER="$("$HERE/docker-engine.sh" --print-docker)"
for image in "$RUNTIME_IMAGE" "$OPERATOR_IMAGE"; do
  "$DOCKER" image inspect "$image" > /dev/null 2>&1 || die "no image $image: run make images first"
done
mkdir -p "$WORK"

# Containers and networks this script creates; removed on exit, whatever happens.
CONTAINERS=()
CONTROLPLANE_STARTED=0
cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do "$DOCKER" rm -f "$c" > /dev/null 2>&1 || true; done
  "$DOCKER" network rm "$NETWORK" > /dev/null 2>&1 || true
  if [[ $CONTROLPLANE_STARTED == 1 ]]; then "$HERE/controlplane.sh" down "$WORK/controlplane" > /dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# run_container NAME ARGS...: docker run -d, remembering NAME for the cleanup.
run_container() {
  local name="$1"
  shift
  "$DOCKER" rm -f "$name" > /dev/null 2>&1 || true
  CONTAINERS+=("$name")
  "$DOCKER" run -d --name "$name" "$@" > /dev/null
}

# wait_exit NAME: the container's exit code, once it exited (fails after TIMEOUT).
wait_exit() {
  local deadline=$(( SECONDS + TIMEOUT ))
  while [[ "$("$DOCKER" inspect -f '{{.State.Status}}' "$1")" != exited ]]; do
    if (( SECONDS >= deadline )); then
      "$DOCKER" logs --tail 30 "$1" >&2 || true
      die "$1 still running after ${TIMEOUT}s"
    fi
    sleep 0.5
  done
  "$DOCKER" inspect -f '{{.State.ExitCode}}' "$1"
}

# wait_healthy NAME: until Docker reports the image's HEALTHCHECK healthy.
wait_healthy() {
  local deadline=$(( SECONDS + TIMEOUT )) status
  while :; do
    status="$("$DOCKER" inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$1")"
    [[ "$status" == healthy ]] && return 0
    [[ "$status" == none ]] && die "$1 has no HEALTHCHECK"
    if [[ "$("$DOCKER" inspect -f '{{.State.Running}}' "$1")" != true ]] || (( SECONDS >= deadline )); then
      "$DOCKER" logs --tail 30 "$1" >&2 || true
      "$DOCKER" inspect -f '{{json .State.Health}}' "$1" >&2 || true
      die "$1 did not become healthy (status $status)"
    fi
    sleep 0.5
  done
}

# expect_exit NAME CODE: NAME exits with CODE, else its log is shown.
expect_exit() {
  local code
  code="$(wait_exit "$1")"
  if [[ "$code" != "$2" ]]; then
    "$DOCKER" logs --tail 40 "$1" >&2 || true
    die "$1 exited with $code, expected $2"
  fi
}

check_image_metadata() {
  local image="$1" user title
  user="$("$DOCKER" image inspect -f '{{.Config.User}}' "$image")"
  [[ "$user" == 10001:10001 ]] || die "$image runs as '$user', expected the non-root 10001:10001"
  title="$("$DOCKER" image inspect -f '{{index .Config.Labels "org.opencontainers.image.title"}}' "$image")"
  [[ -n "$title" ]] || die "$image has no org.opencontainers.image.title label"
}

# cluster_training SCENARIO STEPS SYNC JOBS...: one container per task of JOBS
# (ps, chief, worker), the PS first and healthy, then the training tasks.
cluster_training() {
  local scenario="$1" steps="$2" sync="$3"
  shift 3
  local jobs=("$@") cluster="" job t0=$SECONDS
  "$DOCKER" network rm "$NETWORK" > /dev/null 2>&1 || true
  "$DOCKER" network create "$NETWORK" > /dev/null
  local hosts=()
  for job in "${jobs[@]}"; do
    cluster+="${cluster:+, }\"$job\": [\"tg-$job-0:2222\"]"
    hosts+=("tg-$job-0")
  done
  tf_config() { printf '{"cluster": {%s}, "task": {"type": "%s", "index": 0}}' "$cluster" "$1"; }

  # The tasks talk mutual TLS, as in a TrainingJob: a CA and a certificate naming every
  # task, made by the image itself (its user owns them), mounted read-only into each task.
  rm -rf "$WORK/tls" && mkdir -m 0777 "$WORK/tls"
  "$DOCKER" run --rm "${HARDENED[@]}" -v "$WORK/tls:/tls" --entrypoint python "$RUNTIME_IMAGE" -c '
import sys
from tensorgrid.distributed.rpc import certificates
authority = certificates.new_authority("smoke-images CA")
certificates.write_task_directory("/tls/job", authority, "smoke-images", names=sys.argv[1:])
' "${hosts[@]}" > /dev/null || die "the runtime image could not make the job's certificates"
  local tls=(-v "$WORK/tls/job:/var/run/tensorgrid/tls:ro" -e TENSORGRID_TLS_DIR=/var/run/tensorgrid/tls)

  run_container tg-ps-0 --network "$NETWORK" --hostname tg-ps-0 "${HARDENED[@]}" "${tls[@]}" \
    --health-interval 1s --health-start-period 60s -e TF_CONFIG="$(tf_config ps)" "$RUNTIME_IMAGE"
  wait_healthy tg-ps-0
  local trainers=()
  for job in "${jobs[@]}"; do
    [[ $job == ps ]] && continue
    trainers+=("tg-$job-0")
    run_container "tg-$job-0" --network "$NETWORK" --hostname "tg-$job-0" "${HARDENED[@]}" "${tls[@]}" \
      -e TF_CONFIG="$(tf_config "$job")" -e TENSORGRID_SYNC="$sync" \
      --entrypoint python "$RUNTIME_IMAGE" /app/examples/distributed_digits.py --steps "$steps"
  done
  local trainer
  for trainer in "${trainers[@]}"; do expect_exit "$trainer" 0; done
  local chief="${trainers[0]}" line
  line="$("$DOCKER" logs "$chief" 2>&1 | grep -E '^test accuracy [0-9.]+' || true)"
  [[ -n "$line" ]] || { "$DOCKER" logs --tail 30 "$chief" >&2; die "$chief printed no test accuracy"; }
  expect_exit tg-ps-0 0
  log "$scenario: ok in $((SECONDS - t0))s ($chief: $line)"
  for trainer in tg-ps-0 "${trainers[@]}"; do "$DOCKER" rm -f "$trainer" > /dev/null; done
  "$DOCKER" network rm "$NETWORK" > /dev/null
}

smoke_runtime() {
  check_image_metadata "$RUNTIME_IMAGE"
  cluster_training "runtime (async, 1 ps + 1 worker)" 1500 0 ps worker
}

smoke_runtime_sync() {
  cluster_training "runtime-sync (sync, 1 ps + chief + 1 worker)" 1000 1 ps chief worker
}

smoke_cuda() {
  local t0=$SECONDS out
  "$DOCKER" image inspect "$CUDA_IMAGE" > /dev/null 2>&1 \
    || die "no image $CUDA_IMAGE: run make images first (with the same OFFLINE_BASES), or set BUILD_CUDA=0"
  check_image_metadata "$CUDA_IMAGE"
  out="$("$DOCKER" run --rm "${HARDENED[@]}" --entrypoint python "$CUDA_IMAGE" -c '
import importlib.metadata, sys
from tensorgrid.kernels import backend
print("cupy-cuda12x", importlib.metadata.version("cupy-cuda12x"), "gpu_available", backend.gpu_available())
sys.exit(1 if backend.gpu_available() else 0)
' 2>&1)" || die "CUDA variant: $out"
  "$DOCKER" run --rm "${HARDENED[@]}" --entrypoint python "$CUDA_IMAGE" \
    /app/examples/digits_mlp.py --steps 300 --min-accuracy 0.85 > "$WORK/cuda.log" 2>&1 \
    || { tail -n 20 "$WORK/cuda.log" >&2; die "CUDA variant did not train on the CPU"; }
  log "cuda ($CUDA_IMAGE): ok in $((SECONDS - t0))s ($out; $(grep -E '^test accuracy' "$WORK/cuda.log"))"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_free() {
  python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
try:
    s.bind(("0.0.0.0", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}

smoke_operator() {
  local t0=$SECONDS kubectl kubeconfig metrics_port liveness_port
  check_image_metadata "$OPERATOR_IMAGE"
  kubectl="$("$HERE/build-kubernetes.sh" --print-bin-dir)/kubectl"
  CONTROLPLANE_STARTED=1
  kubeconfig="$("$HERE/controlplane.sh" up "$WORK/controlplane")"
  kube() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }
  kube apply -f "$REPO_ROOT/crds/" > /dev/null
  # `kubectl wait --for condition=...` fails at once ("accessor error: <nil>") when the CRD has no
  # conditions yet, as it may right after the apply: wait for the Established one to appear.
  local established=""
  for _ in $(seq 60); do
    established="$(kube get crd trainingjobs.tensorgrid.io \
      -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null || true)"
    [[ $established == True ]] && break
    sleep 1
  done
  [[ $established == True ]] || { echo "smoke-images: the TrainingJob CRD was not Established after 60s" >&2; exit 1; }
  # The container's user must read the kubeconfig (the control plane's is root's, mode 600).
  install -m 0644 "$kubeconfig" "$WORK/kubeconfig"
  # The image's HEALTHCHECK asks port 8081: use the default ports when they are free.
  if port_free 8081 && port_free 8080; then
    liveness_port=8081 metrics_port=8080
  else
    liveness_port="$(free_port)" metrics_port="$(free_port)"
    log "ports 8080/8081 are busy here: using $metrics_port/$liveness_port, without the image's HEALTHCHECK"
  fi
  run_container tg-operator --network host "${HARDENED[@]}" --health-interval 1s \
    -v "$WORK/kubeconfig:/etc/tensorgrid/kubeconfig:ro" "$OPERATOR_IMAGE" \
    --kubeconfig /etc/tensorgrid/kubeconfig --standalone \
    --metrics-port "$metrics_port" --liveness-port "$liveness_port"

  local deadline=$(( SECONDS + TIMEOUT ))
  until curl -fsS --max-time 3 "http://127.0.0.1:$liveness_port/healthz" > /dev/null 2>&1; do
    if [[ "$("$DOCKER" inspect -f '{{.State.Running}}' tg-operator)" != true ]] || (( SECONDS >= deadline )); then
      "$DOCKER" logs --tail 40 tg-operator >&2
      die "the operator did not answer /healthz on port $liveness_port"
    fi
    sleep 0.5
  done
  [[ $liveness_port != 8081 ]] || wait_healthy tg-operator
  # Read the whole page first: `curl | grep -q` fails under pipefail when grep
  # stops at its first match and curl's next write gets EPIPE (curl exit 23).
  local metrics
  metrics="$(curl -fsS --max-time 3 "http://127.0.0.1:$metrics_port/metrics")" \
    || die "the operator's metrics port $metrics_port did not answer"
  grep -q '^tensorgrid_operator_' <<< "$metrics" \
    || die "no tensorgrid_operator_ metrics on port $metrics_port"

  kube create namespace tg-smoke > /dev/null
  kube -n tg-smoke apply -f "$REPO_ROOT/examples/trainingjob-async.yaml" > /dev/null
  deadline=$(( SECONDS + TIMEOUT ))
  until [[ "$(kube -n tg-smoke get pods,services -l tensorgrid.io/job-name=digits-async -o name | wc -l)" == 6 ]]; do
    if (( SECONDS >= deadline )); then
      kube -n tg-smoke get tj,pods,services >&2 || true
      "$DOCKER" logs --tail 40 tg-operator >&2
      die "the operator did not create the 3 pods and 3 Services of digits-async"
    fi
    sleep 0.5
  done
  "$DOCKER" stop -t 30 tg-operator > /dev/null
  expect_exit tg-operator 0
  "$HERE/controlplane.sh" down "$WORK/controlplane" > /dev/null 2>&1
  CONTROLPLANE_STARTED=0
  log "operator: ok in $((SECONDS - t0))s (/healthz, /metrics, HEALTHCHECK, TrainingJob -> 3 pods + 3 Services, clean stop)"
}

passed=0
for target in "${targets[@]}"; do
  case "$target" in
    runtime) smoke_runtime ;;
    runtime-sync) smoke_runtime_sync ;;
    cuda) smoke_cuda ;;
    operator) smoke_operator ;;
    *) die "unknown smoke test: $target (runtime, runtime-sync, cuda, operator)" ;;
  esac
  passed=$((passed + 1))
done
echo "images: $passed passed, 0 failed"
