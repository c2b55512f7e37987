#!/usr/bin/env bash
# push-images.sh: build the images of docker/ and push them to a registry (`make images-push
# REGISTRY=...`), under the names the chart and the examples use with `image.registry`:
#   $REGISTRY/tensorgrid:$VERSION            runtime, CPU (every example's image)
#   $REGISTRY/tensorgrid-operator:$VERSION   operator (the chart's image.repository, tag = appVersion)
#   $REGISTRY/tensorgrid:$VERSION-cuda       runtime, CUDA 12 (examples/trainingjob-gpu.yaml); BUILD_CUDA=0 skips it
#
# Two ways, chosen by BUILDX (auto, the default: buildx when `docker buildx version` answers):
#   buildx  one `docker buildx build --platform $PLATFORMS --push` per image: a multi-arch
#           manifest list (default linux/amd64,linux/arm64; CUDA_PLATFORMS for the CUDA image),
#           built FROM the standard public bases, which are multi-arch
#   plain   `make images` (hack/build-images.sh: this machine's architecture only), then
#           docker tag and docker push; the only way with OFFLINE_BASES=1 (local bases have one
#           architecture), which pushes no CUDA image (its offline build is a path check)
# Log in first (`docker login $REGISTRY`). --dry-run prints the docker commands instead of
# running them, and needs no Docker engine (BUILDX=auto then means plain).
#
# Usage: REGISTRY=registry.example.com/ml hack/push-images.sh [--dry-run]
# Environment: REGISTRY (required: a registry host with an optional path), BUILDX (auto, 1, 0),
# PLATFORMS, CUDA_PLATFORMS, BUILD_CUDA, TENSORGRID_OFFLINE_BASES and the names of hack/images.env.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=hack/images.env
source "$HERE/images.env"

log() { printf '[push-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 2; }

DRY_RUN=0
case "${1:-}" in
  "") ;;
  --dry-run) DRY_RUN=1 ;;
  *) die "unknown argument '$1'; usage: REGISTRY=<registry> $0 [--dry-run]" ;;
esac

REGISTRY="${REGISTRY:-}"
REGISTRY="${REGISTRY%/}"
[[ -n "$REGISTRY" ]] || die "REGISTRY is not set: name the registry to push to, e.g." \
  "make images-push REGISTRY=registry.example.com/ml (the chart's image.registry)"
[[ "$REGISTRY" =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] \
  || die "REGISTRY '$REGISTRY' is not a registry host with an optional path, e.g. registry.example.com:5000/ml"

PLATFORMS="${PLATFORMS:-linux/amd64,linux/arm64}"
CUDA_PLATFORMS="${CUDA_PLATFORMS:-linux/amd64}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/pyproject.toml" | head -n1)"
REVISION="$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

if [[ "$DRY_RUN" == 1 ]]; then
  DOCKER=docker
else
  DOCKER="$("$HERE/docker-engine.sh" --print-docker)"
fi

BUILDX="${BUILDX:-auto}"
case "$BUILDX" in
  auto)
    if [[ "$DRY_RUN" == 0 && "$TENSORGRID_OFFLINE_BASES" == 0 ]] && "$DOCKER" buildx version > /dev/null 2>&1; then
      BUILDX=1
    else
      BUILDX=0
    fi ;;
  0|1) ;;
  *) die "BUILDX is '$BUILDX': auto (buildx when available), 1 (buildx, multi-arch) or 0 (docker tag and push)" ;;
esac
[[ "$BUILDX" == 0 || "$TENSORGRID_OFFLINE_BASES" == 0 ]] \
  || die "BUILDX=1 builds FROM the public multi-arch bases; with OFFLINE_BASES=1 use BUILDX=0"

# run COMMAND...: run it, or print it under --dry-run.
run() {
  if [[ "$DRY_RUN" == 1 ]]; then
    printf '%q ' "$@" | sed 's/ $//'
    printf '\n'
  else
    "$@"
  fi
}

META_ARGS=(--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED")

# buildx_push IMAGE PLATFORMS DOCKERFILE ARGS...: build for every platform and push the manifest list.
buildx_push() {
  local image="$1" platforms="$2" dockerfile="$3"
  shift 3
  log "building and pushing $image for $platforms"
  run "$DOCKER" buildx build --platform "$platforms" -f "$REPO_ROOT/$dockerfile" -t "$image" "${META_ARGS[@]}" \
    "$@" --push "$REPO_ROOT"
}

# tag_push LOCAL IMAGE: push the local build under the registry's name.
tag_push() {
  log "pushing $1 as $2"
  run "$DOCKER" tag "$1" "$2"
  run "$DOCKER" push "$2"
}

push_cuda=1
[[ "${BUILD_CUDA:-1}" != 0 ]] || push_cuda=0

if [[ "$BUILDX" == 1 ]]; then
  buildx_push "$REGISTRY/tensorgrid:$VERSION" "$PLATFORMS" docker/runtime.Dockerfile \
    --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE" --build-arg VARIANT=cpu
  buildx_push "$REGISTRY/tensorgrid-operator:$VERSION" "$PLATFORMS" docker/operator.Dockerfile \
    --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE"
  if [[ "$push_cuda" == 1 ]]; then
    buildx_push "$REGISTRY/tensorgrid:$VERSION-cuda" "$CUDA_PLATFORMS" docker/runtime.Dockerfile \
      --build-arg "BASE_IMAGE=$CUDA_BASE_IMAGE" --build-arg VARIANT=cuda
  fi
else
  if [[ "$TENSORGRID_OFFLINE_BASES" == 1 && "$push_cuda" == 1 ]]; then
    log "OFFLINE_BASES=1: no CUDA image to push (its offline build, $CUDA_IMAGE, lacks NVIDIA's libraries)"
    push_cuda=0
  fi
  targets=(runtime operator)
  [[ "$push_cuda" == 0 ]] || targets+=(cuda)
  run env "BUILD_CUDA=$push_cuda" "TENSORGRID_OFFLINE_BASES=$TENSORGRID_OFFLINE_BASES" \
    "$HERE/build-images.sh" "${targets[@]}"
  tag_push "$RUNTIME_IMAGE" "$REGISTRY/tensorgrid:$VERSION"
  tag_push "$OPERATOR_IMAGE" "$REGISTRY/tensorgrid-operator:$VERSION"
  [[ "$push_cuda" == 0 ]] || tag_push "$CUDA_IMAGE" "$REGISTRY/tensorgrid:$VERSION-cuda"
fi
if [[ "$DRY_RUN" == 1 ]]; then
  log "dry run: nothing was built or pushed"
else
  log "pushed to $REGISTRY: helm install ... --set image.registry=$REGISTRY (docs/images.md)"
fi
