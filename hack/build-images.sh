#!/usr/bin/env bash
# build-images.sh: build the images of docker/ with the local Docker engine (`make images`).
#
# Installs and starts the engine if needed (hack/docker-engine.sh), makes the local
# base images (hack/base-images.sh: no registry is reachable, so python:3.11-slim is
# replaced by a debootstrapped Debian with python3), then builds:
#   $RUNTIME_IMAGE           docker/runtime.Dockerfile, VARIANT=cpu (also tagged :<version>)
#   $OPERATOR_IMAGE          docker/operator.Dockerfile (also tagged :<version>, the chart's default)
#   $CUDA_PATH_CHECK_IMAGE   docker/runtime.Dockerfile, VARIANT=cuda on $OS_BASE_IMAGE:
#                            NVIDIA's CUDA image cannot be pulled here, so a base
#                            without Python stands in for it; this builds every step
#                            of the CUDA variant (python3 from apt, cupy-cuda12x from
#                            the [gpu] extra) except the CUDA libraries themselves
# Repeated builds reuse Docker's layer cache: only changed sources are rebuilt.
#
# Usage: hack/build-images.sh [runtime|operator|cuda-path-check ...]   (default: all)
# Environment: names as in hack/images.env; CUDA_PATH_CHECK=0 skips that image;
# DOCKER_BUILDKIT (default 0: the engine's classic builder, which needs no buildx);
# IMAGES_LOG_DIR (default .cache/images) for the build logs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=hack/images.env
source "$HERE/images.env"
CUDA_PATH_CHECK_IMAGE="${CUDA_PATH_CHECK_IMAGE:-tensorgrid:cuda-path-check}"
LOG_DIR="${IMAGES_LOG_DIR:-$REPO_ROOT/.cache/images}"
export DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}"

log() { printf '[build-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

targets=("$@")
if [[ ${#targets[@]} == 0 ]]; then
  targets=(runtime operator)
  [[ "${CUDA_PATH_CHECK:-1}" == 0 ]] || targets+=(cuda-path-check)
fi

DOCKER="$("$HERE/docker-engine.sh" --print-docker)"
"$HERE/base-images.sh"
mkdir -p "$LOG_DIR"

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
    runtime)
      build runtime "$RUNTIME_IMAGE" docker/runtime.Dockerfile \
        --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE" --build-arg VARIANT=cpu
      tag_version "$RUNTIME_IMAGE" ;;
    operator)
      build operator "$OPERATOR_IMAGE" docker/operator.Dockerfile --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE"
      tag_version "$OPERATOR_IMAGE" ;;
    cuda-path-check)
      build cuda-path-check "$CUDA_PATH_CHECK_IMAGE" docker/runtime.Dockerfile \
        --build-arg "BASE_IMAGE=$OS_BASE_IMAGE" --build-arg VARIANT=cuda ;;
    *) die "unknown image: $target (runtime, operator, cuda-path-check)" ;;
  esac
done
