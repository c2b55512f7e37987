#!/usr/bin/env bash
# tools.sh: install the command-line tools the chart tests need (`make tools`).
#
#   helm     built with `go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION` (no
#            other download is possible here), cached by version
#   the script linter (Debian's shellcheck package), for tests/images
#   chromium (Debian's package), the headless browser of tests/runtime/summary's TensorBoard test
#   promtool (Debian's prometheus package), which parses the chart's dashboard queries (tests/charts)
#   kubectl  the Kubernetes 1.34 kubectl of hack/build-kubernetes.sh (validation
#            uses that release's real API server: `kubectl apply --dry-run=server`)
#   kind     with --with-kind, for the end-to-end suite (`go install
#            sigs.k8s.io/kind@$KIND_VERSION`): v0.30 is the last release tested on
#            cgroup v1, which these machines have
#   kwok     with --with-kwok, for the operator tests and benchmark on simulated nodes
#            (`go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION`): v0.8 is the first
#            release whose supported Kubernetes releases include 1.34 (v0.7 stops at 1.33);
#            it needs Go 1.26
#   scheduler-plugins-scheduler, scheduler-plugins-controller
#            with --with-gang-scheduler, for the gang scheduling tests: the scheduler of
#            sigs.k8s.io/scheduler-plugins (kube-scheduler with its Coscheduling plugin) and its
#            controller (it keeps each PodGroup's status.phase), release $SCHEDULER_PLUGINS_VERSION,
#            the one for Kubernetes 1.34. Its go.mod replaces the k8s.io modules, which `go
#            install` refuses, so it is built in a wrapper module (as hack/build-kubernetes.sh
#            builds kube-apiserver) that pins them to the control plane's release
#            ($KUBERNETES_VERSION of hack/build-kubernetes.sh): the same scheduler framework as
#            the test control plane's kube-scheduler, and its compiled packages are reused
#   cert-manager-controller, cert-manager-crds/
#            with --with-cert-manager, for the tests of the operator's cert-manager mode: the real
#            controllers of cert-manager $CERT_MANAGER_VERSION (Issuers, ClusterIssuers, the CA and
#            self-signed signers, the Certificate controllers) under the small main of
#            hack/cert-manager-controller/main.go, a test harness. cert-manager's own cmd/controller is
#            a nested module that is not on the Go module proxy, so that main is built in a wrapper
#            module whose path starts with github.com/cert-manager/cert-manager/ (Go's internal rule
#            goes by import path) and requires the release's main module; its CRDs are the release's
#            deploy/crds, copied from the module. v1.19 is the last release built against the
#            Kubernetes 1.34 libraries (v1.20 takes 1.35's); v1.19.6 is not served by the proxy
#   kueue, kueue-config/
#            with --with-kueue, for the tests of TrainingJobs queued by Kueue: the manager of
#            sigs.k8s.io/kueue release $KUEUE_VERSION, and the release's CRDs (config/components/crd/
#            bases) and webhook configurations (config/components/webhook/manifests.yaml) copied into
#            kueue-config/. The manager is the release's cmd/kueue/main.go built in a wrapper module
#            (`go install` of it fails on the proxy's 403 for the module's version list) with one
#            change: the metrics server's certificate folder, hard-coded to /etc/kueue/metrics/certs
#            (where Kueue's Deployment mounts a Secret), is $KUEUE_METRICS_CERT_DIR when that is set,
#            so that a manager outside a cluster can start. v0.15 is built against the Kubernetes 1.34
#            libraries, the control plane's release (v0.19 takes 1.36's)
# Idempotent: a cached binary of the right version is reused at once.
#
# Usage: hack/tools.sh [--with-kind] [--with-kwok] [--with-gang-scheduler] [--with-cert-manager] [--with-kueue]
#                      [--print-bin-dir]
#   --with-kind            also build kind
#   --with-kwok            also build kwok
#   --with-gang-scheduler  also build scheduler-plugins' scheduler and controller
#   --with-cert-manager    also build the cert-manager controllers' test harness and copy cert-manager's CRDs
#   --with-kueue           also build Kueue's manager and copy its CRDs and webhook configurations
#   --print-bin-dir        print the directory holding helm, kind, kwok, scheduler-plugins, cert-manager and kueue
#                          (builds nothing)
# Environment: TENSORGRID_CACHE (default ~/.cache/tensorgrid), HELM_VERSION, KIND_VERSION, KWOK_VERSION,
# SCHEDULER_PLUGINS_VERSION, CERT_MANAGER_VERSION, KUEUE_VERSION, KUBERNETES_VERSION, GO (default: go on PATH, else
# /usr/local/go/bin/go).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
KIND_VERSION="${KIND_VERSION:-v0.30.0}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
SCHEDULER_PLUGINS_VERSION="${SCHEDULER_PLUGINS_VERSION:-v0.34.7}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.19.5}"
KUEUE_VERSION="${KUEUE_VERSION:-v0.15.2}"
HERE="$(cd "$(dirname "$0")" && pwd)"
# The control plane's release (hack/build-kubernetes.sh's default), which scheduler-plugins is built against.
# shellcheck disable=SC2016  # the pattern matches the literal ${KUBERNETES_VERSION:-...} of that script
KUBERNETES_VERSION="${KUBERNETES_VERSION:-$(sed -n 's/^KUBERNETES_VERSION="${KUBERNETES_VERSION:-\(v[^}]*\)}"$/\1/p' "$HERE/build-kubernetes.sh")}"
CACHE="${TENSORGRID_CACHE:-$HOME/.cache/tensorgrid}"
BIN="$CACHE/bin"

log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

with_kind=0
with_kwok=0
with_gang_scheduler=0
with_cert_manager=0
with_kueue=0
for arg in "$@"; do
  case "$arg" in
    --with-kind) with_kind=1 ;;
    --with-kwok) with_kwok=1 ;;
    --with-gang-scheduler) with_gang_scheduler=1 ;;
    --with-cert-manager) with_cert_manager=1 ;;
    --with-kueue) with_kueue=1 ;;
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

# A headless browser that opens TensorBoard's scalars page, and Prometheus' query parser, for the tests
# of what users look at (tests/runtime/summary/test_tensorboard_in_a_browser.py,
# tests/charts/test_dashboard_queries.py).
for package_and_command in chromium:chromium prometheus:promtool; do
  if ! command -v "${package_and_command#*:}" > /dev/null; then
    log "installing ${package_and_command%%:*} (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${package_and_command%%:*}" > /dev/null 2>&1 \
      || { apt-get update -q > /dev/null \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${package_and_command%%:*}" > /dev/null; }
  fi
done

# The same module and build caches as hack/build-kubernetes.sh.
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=

# take_go_mod DIR: DIR/go.mod.new becomes DIR/go.mod when it differs (then go.sum is made
# again), so an unchanged wrapper module keeps its go.sum and its build cache entries.
take_go_mod() {
  if ! cmp -s "$1/go.mod.new" "$1/go.mod"; then
    mv "$1/go.mod.new" "$1/go.mod"
    rm -f "$1/go.sum"
  else
    rm -f "$1/go.mod.new"
  fi
}

# module_dir MODULE VERSION: downloads MODULE@VERSION into the module cache and prints its folder.
module_dir() {
  local json dir
  json="$("$(go_tool)" mod download -json "$1@$2")"
  dir="$(sed -n 's/.*"Dir": *"\([^"]*\)".*/\1/p' <<< "$json" | head -n1)"
  [[ -d "$dir" ]] || { echo "tools: could not download $1@$2: $json" >&2; exit 1; }
  echo "$dir"
}

# require_wrapper WRAP NAME MODULE VERSION DIR: WRAP/go.mod makes WRAP the module NAME, which requires
# MODULE at VERSION (whose folder is DIR, for its go line) and nothing else: its build list is the release's own.
require_wrapper() {
  {
    echo "// Generated by tensorgrid hack/tools.sh; do not edit."
    echo "module $2"
    echo
    grep -E '^go [0-9]' "$5/go.mod"
    echo
    echo "require $3 $4"
  } > "$1/go.mod.new"
  take_go_mod "$1"
}

go_tool() {
  local go
  go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [[ -x "$go" ]] || { echo "tools: no Go toolchain found (set GO=...)" >&2; exit 1; }
  echo "$go"
}

# go_build NAME VERSION MODULE LDFLAGS [VERSION-ARGS]: go install MODULE@VERSION into $BIN
# unless its stamp says that version is there (helm prints e.g. v3.21.4+g1234abc, so a stamp
# records the version we built instead); the new binary must answer VERSION-ARGS (default
# `version`).
go_build() {
  local name="$1" version="$2" module="$3" ldflags="$4" version_args="${5:-version}" go t0=$SECONDS
  if [[ -x "$BIN/$name" && "$(cat "$BIN/.$name.stamp" 2>/dev/null)" == "$version" ]]; then
    return 0
  fi
  go="$(go_tool)"
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

# scheduler_plugins_build: the scheduler and the controller of sigs.k8s.io/scheduler-plugins, built in a
# wrapper module whose replace lines are the release's own with its Kubernetes patch release swapped for
# the control plane's (v0.34.7 -> v0.34.10, v1.34.7 -> v1.34.10); unless their stamps say that pair is there.
scheduler_plugins_build() {
  local stamp="$SCHEDULER_PLUGINS_VERSION kubernetes $KUBERNETES_VERSION recipe 2" go wrap gomod upstream said t0=$SECONDS
  if [[ -x "$BIN/scheduler-plugins-scheduler" && -x "$BIN/scheduler-plugins-controller" \
        && "$(cat "$BIN/.scheduler-plugins.stamp" 2>/dev/null)" == "$stamp" ]]; then
    return 0
  fi
  [[ -n "$KUBERNETES_VERSION" ]] || { echo "tools: no KUBERNETES_VERSION found in hack/build-kubernetes.sh" >&2; exit 1; }
  go="$(go_tool)"
  wrap="$CACHE/src/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION-$KUBERNETES_VERSION"
  mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE" "$wrap"
  log "building scheduler-plugins $SCHEDULER_PLUGINS_VERSION against Kubernetes $KUBERNETES_VERSION with" \
      "$("$go" version | awk '{print $3}') (wrapper module $wrap)"
  gomod="$(module_dir sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION")/go.mod"
  # The release's Kubernetes patch release, from its own pin of k8s.io/kubernetes.
  upstream="$(sed -n 's#^[[:space:]]*k8s\.io/kubernetes => k8s\.io/kubernetes v1\.\([0-9.]*\)$#\1#p' "$gomod")"
  [[ -n "$upstream" ]] || { echo "tools: $gomod pins no k8s.io/kubernetes release" >&2; exit 1; }
  {
    echo "// Generated by tensorgrid hack/tools.sh; do not edit."
    echo "module tensorgrid.local/scheduler-plugins-build"
    echo
    grep -E '^go [0-9]' "$gomod"
    echo
    echo "require sigs.k8s.io/scheduler-plugins $SCHEDULER_PLUGINS_VERSION"
    echo
    echo "replace ("
    sed -n 's#^\(replace\)\{0,1\}[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \(k8s\.io/[^[:space:]]*\) \(v[^[:space:]]*\)$#\2 \3 \4#p' \
        "$gomod" |
      while read -r mod target version; do
        case "$version" in
          "v0.$upstream") version="v0.${KUBERNETES_VERSION#v1.}" ;;
          "v1.$upstream") version="$KUBERNETES_VERSION" ;;
        esac
        printf '\t%s => %s %s\n' "$mod" "$target" "$version"
      done
    echo ")"
  } > "$wrap/go.mod.new"
  take_go_mod "$wrap"
  echo 'package schedulerpluginsbuild // placeholder so the wrapper module has a package' > "$wrap/doc.go"
  # The version stamped is the Kubernetes release with scheduler-plugins' as build metadata: the scheduler
  # derives its emulation version from it and refuses to start with scheduler-plugins' own v0.34.7
  # ("emulation version 0.34 is not between [1.31, 0.34.0]"). The tags and -trimpath are
  # hack/build-kubernetes.sh's, so the Kubernetes packages compiled there are reused from GOCACHE.
  local ver="${KUBERNETES_VERSION#v}" ldflags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION+scheduler-plugins-$SCHEDULER_PLUGINS_VERSION"
    ldflags+=" -X $pkg.gitMajor=${ver%%.*} -X $pkg.gitMinor=$(cut -d. -f2 <<< "$ver") -X $pkg.gitTreeState=clean"
  done
  (cd "$wrap" && nice -n 10 "$go" build -mod=mod -p "${BUILD_PARALLELISM:-2}" -trimpath -tags selinux,notest,grpcnotrace \
      -ldflags "$ldflags" -o "$wrap/bin/" \
      sigs.k8s.io/scheduler-plugins/cmd/scheduler sigs.k8s.io/scheduler-plugins/cmd/controller)
  said="$("$wrap/bin/scheduler" --version)"
  [[ "$said" == *"$SCHEDULER_PLUGINS_VERSION"* ]] \
    || { echo "tools: the scheduler built says '$said', not $SCHEDULER_PLUGINS_VERSION" >&2; exit 1; }
  # The controller has no --version; its usage (exit status 2) names its flags.
  said="$("$wrap/bin/controller" --help 2>&1 || true)"
  [[ "$said" == *metricsAddr* ]] || { echo "tools: the controller built does not run: $said" >&2; exit 1; }
  mv -f "$wrap/bin/scheduler" "$BIN/scheduler-plugins-scheduler"
  mv -f "$wrap/bin/controller" "$BIN/scheduler-plugins-controller"
  echo "$stamp" > "$BIN/.scheduler-plugins.stamp"
  log "scheduler-plugins $SCHEDULER_PLUGINS_VERSION in $BIN (scheduler-plugins-scheduler, -controller), built in $((SECONDS - t0))s"
}

if [[ $with_gang_scheduler == 1 ]]; then
  scheduler_plugins_build
fi

# cert_manager_build: hack/cert-manager-controller/main.go against cert-manager's release in a wrapper module,
# and the release's CRDs; unless the stamp says that release and that main are there.
cert_manager_build() {
  local main="$HERE/cert-manager-controller/main.go" stamp go wrap dir said t0=$SECONDS
  stamp="$CERT_MANAGER_VERSION main $(sha256sum "$main" | cut -c1-16)"
  if [[ -x "$BIN/cert-manager-controller" && -d "$BIN/cert-manager-crds" \
        && "$(cat "$BIN/.cert-manager.stamp" 2>/dev/null)" == "$stamp" ]]; then
    return 0
  fi
  go="$(go_tool)"
  wrap="$CACHE/src/cert-manager-controller-$CERT_MANAGER_VERSION"
  mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE" "$wrap"
  log "building the cert-manager $CERT_MANAGER_VERSION controllers' test harness with" \
      "$("$go" version | awk '{print $3}') (wrapper module $wrap)"
  dir="$(module_dir github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION")"
  [[ -d "$dir/deploy/crds" ]] || { echo "tools: cert-manager $CERT_MANAGER_VERSION has no deploy/crds in $dir" >&2; exit 1; }
  require_wrapper "$wrap" github.com/cert-manager/cert-manager/tensorgrid-test-harness \
    github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" "$dir"
  cp "$main" "$wrap/main.go"
  (cd "$wrap" && nice -n 10 "$go" build -mod=mod -p "${BUILD_PARALLELISM:-2}" -trimpath \
      -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION" \
      -o "$wrap/bin/cert-manager-controller" .)
  said="$("$wrap/bin/cert-manager-controller" --version)"
  [[ "$said" == "$CERT_MANAGER_VERSION" ]] \
    || { echo "tools: the cert-manager harness built says '$said', not $CERT_MANAGER_VERSION" >&2; exit 1; }
  said="$("$wrap/bin/cert-manager-controller" --list-controllers | tr '\n' ' ')"
  [[ "$said" == *certificaterequests-issuer-ca*certificates-issuing*issuers* ]] \
    || { echo "tools: the cert-manager harness runs none of the expected controllers: $said" >&2; exit 1; }
  rm -rf "$BIN/cert-manager-crds"
  mkdir -p "$BIN/cert-manager-crds"
  cp "$dir"/deploy/crds/*.yaml "$BIN/cert-manager-crds/"
  chmod u+w "$BIN"/cert-manager-crds/*.yaml  # the module cache's files are read-only
  mv -f "$wrap/bin/cert-manager-controller" "$BIN/cert-manager-controller"
  echo "$stamp" > "$BIN/.cert-manager.stamp"
  log "cert-manager $CERT_MANAGER_VERSION harness in $BIN (cert-manager-controller, cert-manager-crds/), built in" \
      "$((SECONDS - t0))s"
}

if [[ $with_cert_manager == 1 ]]; then
  cert_manager_build
fi

# kueue_build: Kueue's manager (its main, with the metrics certificate folder from the environment) in a
# wrapper module that requires the release (its build list is the release's own), and the release's CRDs and
# webhook configurations; unless the stamp says that release and recipe are there.
kueue_build() {
  local stamp="$KUEUE_VERSION recipe 1" go wrap dir said t0=$SECONDS
  local hard_coded='metricsCertPath := "/etc/kueue/metrics/certs"'
  local from_env='metricsCertPath := cmp.Or(os.Getenv("KUEUE_METRICS_CERT_DIR"), "/etc/kueue/metrics/certs")'
  if [[ -x "$BIN/kueue" && -f "$BIN/kueue-config/webhooks.yaml" && "$(cat "$BIN/.kueue.stamp" 2>/dev/null)" == "$stamp" ]]; then
    return 0
  fi
  go="$(go_tool)"
  wrap="$CACHE/src/kueue-$KUEUE_VERSION"
  mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE" "$wrap"
  log "building Kueue $KUEUE_VERSION with $("$go" version | awk '{print $3}') (wrapper module $wrap)"
  dir="$(module_dir sigs.k8s.io/kueue "$KUEUE_VERSION")"
  [[ -f "$dir/config/components/webhook/manifests.yaml" ]] \
    || { echo "tools: Kueue $KUEUE_VERSION has no config/components/webhook/manifests.yaml in $dir" >&2; exit 1; }
  require_wrapper "$wrap" tensorgrid.local/kueue-build sigs.k8s.io/kueue "$KUEUE_VERSION" "$dir"
  grep -qF "$hard_coded" "$dir/cmd/kueue/main.go" \
    || { echo "tools: Kueue $KUEUE_VERSION's cmd/kueue/main.go has no line '$hard_coded' to change" >&2; exit 1; }
  sed "s#$hard_coded#$from_env#; s#^import (#import (\n\t\"cmp\"#" "$dir/cmd/kueue/main.go" > "$wrap/main.go"
  (cd "$wrap" && nice -n 10 "$go" build -mod=mod -p "${BUILD_PARALLELISM:-2}" -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" -o "$wrap/bin/kueue" .)
  # The manager has no --version; its usage (exit status 2, or 0 for --help) names its flags.
  said="$("$wrap/bin/kueue" --help 2>&1 || true)"
  [[ "$said" == *-config* ]] || { echo "tools: the Kueue manager built does not run: $said" >&2; exit 1; }
  rm -rf "$BIN/kueue-config"
  mkdir -p "$BIN/kueue-config/crds"
  cp "$dir"/config/components/crd/bases/*.yaml "$BIN/kueue-config/crds/"
  cp "$dir/config/components/webhook/manifests.yaml" "$BIN/kueue-config/webhooks.yaml"
  chmod -R u+w "$BIN/kueue-config"  # the module cache's files are read-only
  mv -f "$wrap/bin/kueue" "$BIN/kueue"
  echo "$stamp" > "$BIN/.kueue.stamp"
  log "Kueue $KUEUE_VERSION in $BIN (kueue, kueue-config/), built in $((SECONDS - t0))s"
}

if [[ $with_kueue == 1 ]]; then
  kueue_build
fi
