#!/usr/bin/env bash
# build-kubernetes.sh: build a Kubernetes control plane (and optionally node
# binaries) from source through the Go module proxy.
#
# Why this exists: no package registry this project can reach ships
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet or kubeadm,
# and Debian's kubectl/etcd are far too old. The operator tests need a real
# 1.34.x API server (CEL validation, garbage collection), so we compile one.
# The result is cached outside the repository, keyed by version, so a reused
# machine skips the build and CI can still build from cold.
#
# Usage: hack/build-kubernetes.sh [--with-node] [--print-bin-dir]
#   --with-node      also build kubelet, kubeadm and kube-proxy (for kind node images)
#   --print-bin-dir  print the bin directory and exit (builds nothing)
#
# Environment:
#   TENSORGRID_CACHE    cache root (default ~/.cache/tensorgrid)
#   KUBERNETES_VERSION  k8s.io/kubernetes release (default below)
#   ETCD_VERSION        etcd release (default: the etcd version kubeadm of that
#                       release pins, v3.6.5 for 1.34)
#   KUBE_GIT_COMMIT     commit to stamp when the proxy does not report one
#   BUILD_PARALLELISM   go build -p (default 2)
#   GO                  go binary (default: go on PATH, else /usr/local/go/bin/go)
#
# Notes:
# - v1.34.10 is the newest 1.34 patch that both the module proxy serves and the
#   checksum database verifies from here: v1.34.11 and v1.34.12 are on the
#   proxy, but sum.golang.org answers 404 for them, so `go` refuses them
#   (deliberately not worked around with GONOSUMDB/GOFLAGS=-insecure).
#   `go list -m -versions` shows only up to v1.34.4: the proxy's list is
#   incomplete, ask for k8s.io/kubernetes/@v/vX.Y.Z.info directly.
# - Everything is linked statically (CGO_ENABLED=0); upstream links the
#   kubelet with cgo, which it does not need.
# - Upstream builds 1.34 with Go 1.24; we use the installed Go with
#   GOTOOLCHAIN=local, and the wrapper module keeps upstream's
#   `godebug default=go1.24` so runtime defaults match.
set -euo pipefail

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.34.10}"
# Bump when the way binaries are built changes (flags, ldflags): cached
# binaries with another recipe are rebuilt.
RECIPE=1
CACHE="${TENSORGRID_CACHE:-$HOME/.cache/tensorgrid}"
ROOT="$CACHE/kubernetes/$KUBERNETES_VERSION"
BIN="$ROOT/bin"
PARALLELISM="${BUILD_PARALLELISM:-2}"

with_node=0
for arg in "$@"; do
  case "$arg" in
    --with-node) with_node=1 ;;
    --print-bin-dir) echo "$BIN"; exit 0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-kubernetes: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

log() { printf '[build-kubernetes %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Binaries from k8s.io/kubernetes/cmd/<name>; etcd is built separately.
kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
if [[ $with_node == 1 ]]; then
  kube_bins+=(kubelet kubeadm kube-proxy)
fi

# A stamp file per binary is written only after that binary was built and its
# --version output checked, so "stamp present" means "right version present".
# Stamps hold "VERSION recipe N".
stamp_ok() { [[ -x "$BIN/$1" && -f "$BIN/.$1.stamp" && "$(cat "$BIN/.$1.stamp")" == "$2" ]]; }

need_kube=()
for b in "${kube_bins[@]}"; do
  stamp_ok "$b" "$KUBERNETES_VERSION recipe $RECIPE" || need_kube+=("$b")
done
# etcd's stamp holds its own version; any etcd stamp made for this Kubernetes
# release is fine unless ETCD_VERSION asks for a specific one.
etcd_ok=0
if [[ -x "$BIN/etcd" && -f "$BIN/.etcd.stamp" ]]; then
  read -r etcd_have _ etcd_recipe < "$BIN/.etcd.stamp" || true
  if [[ "${etcd_recipe:-}" == "$RECIPE" && ( -z "${ETCD_VERSION:-}" || "$etcd_have" == "$ETCD_VERSION" ) ]]; then
    etcd_ok=1
  fi
fi
if [[ ${#need_kube[@]} == 0 && $etcd_ok == 1 ]]; then
  log "Kubernetes $KUBERNETES_VERSION binaries already in $BIN (nothing to do)"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "build-kubernetes: no Go toolchain found (set GO=...)" >&2; exit 1; }

# Reusable module and build caches under the cache dir. GOTOOLCHAIN=local: use
# the installed Go (1.26 here) rather than fetching the one go.mod names.
export GOMODCACHE="$CACHE/go/mod"
export GOCACHE="$CACHE/go/build"
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOWORK=off
mkdir -p "$BIN" "$ROOT/src" "$GOMODCACHE" "$GOCACHE"

log "Go: $("$GO" version)"
log "cache: $CACHE"

# --- Kubernetes source metadata ----------------------------------------------
log "fetching k8s.io/kubernetes@$KUBERNETES_VERSION (module proxy; a cold cache downloads ~730 MB of modules)"
"$GO" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" > "$ROOT/src/kubernetes.json" || true
# Pull string fields out of go's JSON without needing jq.
json_field() { sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" "$2" | head -n1; }
if grep -q '"Error"' "$ROOT/src/kubernetes.json"; then
  echo "build-kubernetes: $(json_field Error "$ROOT/src/kubernetes.json")" >&2
  echo "build-kubernetes: (a 404 from sumdb means the checksum database does not know this" \
       "version yet; pick another KUBERNETES_VERSION rather than disabling verification)" >&2
  exit 1
fi
kube_dir="$(json_field Dir "$ROOT/src/kubernetes.json")"
kube_gomod="$(json_field GoMod "$ROOT/src/kubernetes.json")"
kube_info="$(json_field Info "$ROOT/src/kubernetes.json")"
[[ -d "$kube_dir" && -f "$kube_gomod" ]] || { echo "build-kubernetes: could not download k8s.io/kubernetes@$KUBERNETES_VERSION" >&2; exit 1; }
# The proxy's .info has the tag time and, for some versions only, the git
# commit; KUBE_GIT_COMMIT can supply it otherwise.
git_commit="${KUBE_GIT_COMMIT:-$(json_field Hash "$kube_info")}"
# The tag's time rather than "now": rebuilding gives the same version output.
build_date="$(json_field Time "$kube_info" | sed 's/\.[0-9]*Z$/Z/')"
build_date="${build_date:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}"

ver="${KUBERNETES_VERSION#v}"
git_major="${ver%%.*}"
git_minor="$(echo "$ver" | cut -d. -f2)"
staging_version="v0.${ver#*.}"        # v1.34.12 -> v0.34.12

# --- wrapper module for k8s.io/kubernetes ------------------------------------
# k8s.io/kubernetes's go.mod replaces its staging modules with ./staging/...
# paths, which do not apply when it is a dependency: pin each to the published
# v0.X.Y instead. Copy its go and godebug lines so runtime defaults match
# upstream's binaries.
wrap="$ROOT/src/kubernetes-wrapper"
mkdir -p "$wrap"
{
  echo "// Generated by tensorgrid hack/build-kubernetes.sh; do not edit."
  echo "module tensorgrid.local/kubernetes-build"
  echo
  grep -E '^go [0-9]' "$kube_gomod"
  grep -E '^godebug ' "$kube_gomod" || true
  echo
  echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
  echo
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$kube_gomod" |
    while read -r mod; do printf '\t%s => %s %s\n' "$mod" "$mod" "$staging_version"; done
  echo ")"
} > "$wrap/go.mod.new"
nstaging="$(grep -c "=> k8s.io/.* $staging_version" "$wrap/go.mod.new" || true)"
# Keep go.sum (and the file's mtime) when nothing changed.
if ! cmp -s "$wrap/go.mod.new" "$wrap/go.mod"; then
  mv "$wrap/go.mod.new" "$wrap/go.mod"
  rm -f "$wrap/go.sum"
else
  rm -f "$wrap/go.mod.new"
fi
# A package in the main module makes `go build` happy with an otherwise empty module.
echo 'package kubernetesbuild // placeholder so the wrapper module has a package' > "$wrap/doc.go"
log "wrapper module: $wrap ($nstaging staging modules pinned to $staging_version)"

# --- etcd version ------------------------------------------------------------
if [[ -z "${ETCD_VERSION:-}" ]]; then
  # kubeadm's DefaultEtcdVersion, e.g. "3.6.4-0" (image tag) -> v3.6.4.
  etcd_tag="$(sed -n 's/^[[:space:]]*DefaultEtcdVersion[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' \
    "$kube_dir/cmd/kubeadm/app/constants/constants.go" | head -n1)"
  if [[ -n "$etcd_tag" ]]; then
    ETCD_VERSION="v${etcd_tag%-*}"
  else
    ETCD_VERSION="$(sed -n 's#^[[:space:]]*go\.etcd\.io/etcd/server/v3 \(v[^[:space:]]*\).*#\1#p' "$kube_gomod" | head -n1)"
  fi
fi
log "etcd version: $ETCD_VERSION"

# --- build Kubernetes --------------------------------------------------------
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION"
  ldflags+=" -X $pkg.gitMajor=$git_major"
  ldflags+=" -X $pkg.gitMinor=$git_minor"
  # Empty when the proxy does not say (else the source default "$Format:%H$" shows).
  ldflags+=" -X $pkg.gitCommit=$git_commit"
  ldflags+=" -X $pkg.gitTreeState=clean"
  ldflags+=" -X $pkg.buildDate=$build_date"
done

check_version() {  # name expected-substring command...
  local name="$1" want="$2" out
  shift 2
  out="$("$@" 2>&1 || true)"
  if [[ "$out" != *"$want"* ]]; then
    echo "build-kubernetes: $name reports '$out', expected '$want'" >&2
    return 1
  fi
}

if [[ ${#need_kube[@]} -gt 0 ]]; then
  pkgs=()
  for b in "${need_kube[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  log "building ${need_kube[*]} ($KUBERNETES_VERSION, commit ${git_commit:-unknown}, -p $PARALLELISM); from cold this takes a while"
  start=$SECONDS
  tmpbin="$ROOT/bin.tmp"
  rm -rf "$tmpbin"; mkdir -p "$tmpbin"
  (cd "$wrap" && nice -n 10 "$GO" build -p "$PARALLELISM" -trimpath -tags selinux,notest,grpcnotrace \
      -ldflags "$ldflags" -o "$tmpbin/" "${pkgs[@]}")
  for b in "${need_kube[@]}"; do
    case "$b" in
      kubectl) check_version "$b" "$KUBERNETES_VERSION" "$tmpbin/$b" version --client ;;
      kubeadm) check_version "$b" "$KUBERNETES_VERSION" "$tmpbin/$b" version -o short ;;
      *)       check_version "$b" "$KUBERNETES_VERSION" "$tmpbin/$b" --version ;;
    esac
    mv -f "$tmpbin/$b" "$BIN/$b"
    echo "$KUBERNETES_VERSION recipe $RECIPE" > "$BIN/.$b.stamp"
    log "built $BIN/$b"
  done
  rmdir "$tmpbin" 2>/dev/null || true
  log "Kubernetes binaries done in $((SECONDS - start))s"
fi

# --- build etcd --------------------------------------------------------------
if [[ $etcd_ok == 0 ]]; then
  ewrap="$ROOT/src/etcd-wrapper"
  mkdir -p "$ewrap"
  "$GO" mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" > "$ROOT/src/etcd.json"
  etcd_gomod="$(json_field GoMod "$ROOT/src/etcd.json")"
  etcd_info="$(json_field Info "$ROOT/src/etcd.json")"
  etcd_commit=""
  if [[ -f "$etcd_info" ]]; then etcd_commit="$(json_field Hash "$etcd_info")"; fi
  {
    echo "// Generated by tensorgrid hack/build-kubernetes.sh; do not edit."
    echo "module tensorgrid.local/etcd-build"
    echo
    grep -E '^go [0-9]' "$etcd_gomod"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  } > "$ewrap/go.mod.new"
  if ! cmp -s "$ewrap/go.mod.new" "$ewrap/go.mod"; then
    mv "$ewrap/go.mod.new" "$ewrap/go.mod"
    rm -f "$ewrap/go.sum"
  else
    rm -f "$ewrap/go.mod.new"
  fi
  cat > "$ewrap/main.go" <<'EOF'
// Generated by tensorgrid hack/build-kubernetes.sh: the etcd server binary,
// i.e. what go.etcd.io/etcd/v3's own main does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
EOF
  log "building etcd $ETCD_VERSION"
  start=$SECONDS
  (cd "$ewrap" && nice -n 10 "$GO" build -p "$PARALLELISM" -trimpath \
      -ldflags "-s -w${etcd_commit:+ -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_commit:0:9}}" \
      -o "$ROOT/etcd.tmp" .)
  check_version etcd "etcd Version: ${ETCD_VERSION#v}" "$ROOT/etcd.tmp" --version
  mv -f "$ROOT/etcd.tmp" "$BIN/etcd"
  echo "$ETCD_VERSION recipe $RECIPE" > "$BIN/.etcd.stamp"
  log "built $BIN/etcd in $((SECONDS - start))s"
fi

log "done: $BIN"
ls -l "$BIN" >&2
