#!/usr/bin/env bash
# build-images.sh: build the images of docker/ with the local Docker engine (`make images`).
#
# Installs and starts the engine if needed (hack/docker-engine.sh), then builds FROM the
# bases hack/images.env chooses:
#   TENSORGRID_OFFLINE_BASES=0 (default)  the standard public bases, pulled when missing:
#     $RUNTIME_IMAGE    docker/runtime.Dockerfile, VARIANT=cpu, on python:3.11-slim
#     $OPERATOR_IMAGE   docker/operator.Dockerfile, on python:3.11-slim
#     $CUDA_IMAGE       docker/runtime.Dockerfile, VARIANT=cuda, on NVIDIA's CUDA 12
#                       runtime image (tensorgrid:latest-cuda)
#   TENSORGRID_OFFLINE_BASES=1  (`make images OFFLINE_BASES=1`, for a machine that reaches
#     no registry, as CI's does) local Debian bases made first by hack/base-images.sh:
#     the runtime and operator images on a debootstrapped Debian with python3, and
#     $CUDA_IMAGE as tensorgrid:cuda-path-check on the base without Python, which
#     stands in for NVIDIA's: every step of the CUDA variant (python3 from apt,
#     cupy-cuda12x from the [gpu] extra) except the CUDA libraries themselves
# The runtime and operator images are also tagged :<version> (the chart's default).
# Repeated builds reuse Docker's layer cache: only changed sources are rebuilt.
#
# Usage: hack/build-images.sh [runtime|operator|cuda ...]   (default: all)
# Environment: TENSORGRID_OFFLINE_BASES and names as in hack/images.env; BUILD_CUDA=0
# skips the CUDA image; DOCKER_BUILDKIT (default 0: the engine's classic builder, which
# needs no buildx); IMAGES_LOG_DIR (default .cache/images) for the build logs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=hack/images.env
source "$HERE/images.env"
LOG_DIR="${IMAGES_LOG_DIR:-$REPO_ROOT/.cache/images}"
export DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}"

log() { printf '[build-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

targets=("$@")
if [[ ${#targets[@]} == 0 ]]; then
  targets=(runtime operator)
  [[ "${BUILD_CUDA:-1}" == 0 ]] || targets+=(cuda)
fi

DOCKER="$("$HERE/docker-engine.sh" --print-docker)"
mkdir -p "$LOG_DIR"

# base_ready IMAGE: IMAGE is in the engine (offline: made above), else pulled; when no registry
# answers, the error says what to do.
base_ready() {
  "$DOCKER" image inspect "$1" > /dev/null 2>&1 && return 0
  log "pulling $1"
  "$DOCKER" pull --quiet "$1" > /dev/null 2> "$LOG_DIR/pull.log" && return 0
  tail -n 5 "$LOG_DIR/pull.log" >&2
  die "cannot pull the base image $1. Without a registry, build FROM local Debian bases:" \
      "make images OFFLINE_BASES=1 (or TENSORGRID_OFFLINE_BASES=1 $0; docs/images.md)"
}
if [[ "$TENSORGRID_OFFLINE_BASES" == 1 ]]; then
  "$HERE/base-images.sh"
fi

VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/pyproject.toml" | head -n1)"
REVISION="$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
META_ARGS=(--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED")

# build NAME IMAGE DOCKERFILE ARGS...: one docker build, its log in LOG_DIR.
build() {
  local name="$1" image="$2" dockerfile="$3" t0=$SECONDS
  shift 3
  log "building $image ($dockerfile $*)"
  if ! "$DOCKER" build -f "$REPO_ROOT/$dockerfile" -t "$image" "${META_ARGS[@]}" "$@" "$REPO_ROOT" \
      > "$LOG_DIR/$name.log" 2>&1; then
    tail -n 40 "$LOG_DIR/$name.log" >&2
    die "building $image failed (log: $LOG_DIR/$name.log)"
  fi
  local size
  size="$("$DOCKER" image inspect -f '{{.Size}}' "$image")"
  log "built $image in $((SECONDS - t0))s, $((size / 1000000)) MB"
}

# Also tag the version, the tag the chart's image.tag defaults to (its appVersion).
tag_version() {
  "$DOCKER" tag "$1" "${1%:*}:$VERSION"
}

for target in "${targets[@]}"; do
  case "$target" in
    runtime|operator) base_ready "$PYTHON_BASE_IMAGE" ;;
    cuda) base_ready "$CUDA_BASE_IMAGE" ;;
    *) die "unknown image: $target (runtime, operator, cuda)" ;;
  esac
done

for target in "${targets[@]}"; do
  case "$target" in
    runtime)
      build runtime "$RUNTIME_IMAGE" docker/runtime.Dockerfile \
        --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE" --build-arg VARIANT=cpu
      tag_version "$RUNTIME_IMAGE" ;;
    operator)
      build operator "$OPERATOR_IMAGE" docker/operator.Dockerfile --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE"
      tag_version "$OPERATOR_IMAGE" ;;
    cuda)
      build cuda "$CUDA_IMAGE" docker/runtime.Dockerfile \
        --build-arg "BASE_IMAGE=$CUDA_BASE_IMAGE" --build-arg VARIANT=cuda ;;
  esac
done
