#!/usr/bin/env bash
# tools.sh: install the command-line tools the chart tests need (`make tools`).
#
#   helm     built with `go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION` (no
#            other download is possible here), cached by version
#   the script linter (Debian's shellcheck package), for tests/images
#   kubectl  the Kubernetes 1.34 kubectl of hack/build-kubernetes.sh (validation
#            uses that release's real API server: `kubectl apply --dry-run=server`)
#   kind     with --with-kind, for the end-to-end suite (`go install
#            sigs.k8s.io/kind@$KIND_VERSION`): v0.30 is the last release tested on
#            cgroup v1, which these machines have
#   kwok     with --with-kwok, for the operator tests and benchmark on simulated nodes
#            (`go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION`): v0.8 is the first
#            release whose supported Kubernetes releases include 1.34 (v0.7 stops at 1.33);
#            it needs Go 1.26
# Idempotent: a cached binary of the right version is reused at once.
#
# Usage: hack/tools.sh [--with-kind] [--with-kwok] [--print-bin-dir]
#   --with-kind      also build kind
#   --with-kwok      also build kwok
#   --print-bin-dir  print the directory holding helm, kind and kwok (builds nothing)
# Environment: TENSORGRID_CACHE (default ~/.cache/tensorgrid), HELM_VERSION, KIND_VERSION, KWOK_VERSION,
# GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
KIND_VERSION="${KIND_VERSION:-v0.30.0}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${TENSORGRID_CACHE:-$HOME/.cache/tensorgrid}"
BIN="$CACHE/bin"

log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

with_kind=0
with_kwok=0
for arg in "$@"; do
  case "$arg" in
    --with-kind) with_kind=1 ;;
    --with-kwok) with_kwok=1 ;;
    --print-bin-dir) echo "$BIN"; exit 0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tools: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

# The script linter (Debian's shellcheck) for tests/images.
if ! command -v shellcheck > /dev/null; then
  log "installing shellcheck (apt-get)"
  apt-get install -y -q shellcheck > /dev/null 2>&1 || { apt-get update -q > /dev/null && apt-get install -y -q shellcheck > /dev/null; }
fi

# The same module and build caches as hack/build-kubernetes.sh.
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=

# go_build NAME VERSION MODULE LDFLAGS [VERSION-ARGS]: go install MODULE@VERSION into $BIN
# unless its stamp says that version is there (helm prints e.g. v3.21.4+g1234abc, so a stamp
# records the version we built instead); the new binary must answer VERSION-ARGS (default
# `version`).
go_build() {
  local name="$1" version="$2" module="$3" ldflags="$4" version_args="${5:-version}" go t0=$SECONDS
  if [[ -x "$BIN/$name" && "$(cat "$BIN/.$name.stamp" 2>/dev/null)" == "$version" ]]; then
    return 0
  fi
  go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [[ -x "$go" ]] || { echo "tools: no Go toolchain found (set GO=...)" >&2; exit 1; }
  mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"
  log "building $name $version with $("$go" version | awk '{print $3}') (go install)"
  GOBIN="$BIN" "$go" install -trimpath -ldflags "$ldflags" "$module@$version"
  # shellcheck disable=SC2086  # VERSION-ARGS is a word list
  "$BIN/$name" $version_args > /dev/null
  echo "$version" > "$BIN/.$name.stamp"
  log "$name $version in $BIN, built in $((SECONDS - t0))s"
}

go_build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
if [[ $with_kind == 1 ]]; then
  go_build kind "$KIND_VERSION" sigs.k8s.io/kind "-s -w"
fi
if [[ $with_kwok == 1 ]]; then
  go_build kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" --version
fi
