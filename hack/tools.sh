#!/usr/bin/env bash
# tools.sh: install the command-line tools the chart tests need (`make tools`).
#
#   helm     built with `go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION` (no
#            other download is possible here), cached by version
#   the script linter (Debian's shellcheck package), for tests/images
#   kubectl  the Kubernetes 1.34 kubectl of hack/build-kubernetes.sh (validation
#            uses that release's real API server: `kubectl apply --dry-run=server`)
# Idempotent: a cached binary of the right version is reused at once.
#
# Usage: hack/tools.sh [--print-bin-dir]
#   --print-bin-dir  print the directory holding helm (builds nothing)
# Environment: TENSORGRID_CACHE (default ~/.cache/tensorgrid), HELM_VERSION,
# GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
CACHE="${TENSORGRID_CACHE:-$HOME/.cache/tensorgrid}"
BIN="$CACHE/bin"

log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for arg in "$@"; do
  case "$arg" in
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

# helm prints e.g. v3.21.4+g1234abc: a stamp records the version we built instead.
if [[ -x "$BIN/helm" && "$(cat "$BIN/.helm.stamp" 2>/dev/null)" == "$HELM_VERSION" ]]; then
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "tools: no Go toolchain found (set GO=...)" >&2; exit 1; }
# The same module and build caches as hack/build-kubernetes.sh.
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=
mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"
t0=$SECONDS
log "building helm $HELM_VERSION with $("$GO" version | awk '{print $3}') (go install)"
GOBIN="$BIN" "$GO" install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
"$BIN/helm" version --short > /dev/null
echo "$HELM_VERSION" > "$BIN/.helm.stamp"
log "helm $("$BIN/helm" version --short) in $BIN, built in $((SECONDS - t0))s"
