#!/usr/bin/env bash
# cluster.sh: the kind cluster of the end-to-end suite, with tensorgrid installed as a
# user installs it (`helm install` of charts/tensorgrid-operator).
#
#   e2e/cluster.sh up      build what is missing (kind, helm, node image, images), create
#                          the cluster, load the images, install the chart; idempotent
#   e2e/cluster.sh prepare build what `up` needs (kind, helm, Docker's engine, Prometheus, the
#                          node image, the images) without a cluster: CI runs it beside the tests
#   e2e/cluster.sh down    delete the cluster (safe to repeat)
#   e2e/cluster.sh images  rebuild the runtime and operator images and load them again
#
# The kubeconfig is written to $E2E_DIR/kubeconfig (default .cache/e2e/kubeconfig).
# Environment: E2E_CLUSTER (cluster name, default tensorgrid-e2e), E2E_DIR,
# KIND_NODE_IMAGE (a published kindest/node image on a machine with a registry; the
# default is the node image assembled by e2e/node-image/build.sh), TENSORGRID_CACHE.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
# The suite is made to run where no registry is reachable (its node image is assembled here
# too): the images build FROM local Debian bases unless TENSORGRID_OFFLINE_BASES=0 says otherwise.
export TENSORGRID_OFFLINE_BASES="${TENSORGRID_OFFLINE_BASES:-1}"
# shellcheck source=hack/images.env
source "$REPO/hack/images.env"
CLUSTER="${E2E_CLUSTER:-tensorgrid-e2e}"
E2E_DIR="${E2E_DIR:-$REPO/.cache/e2e}"
KUBECONFIG_PATH="$E2E_DIR/kubeconfig"
RELEASE=tensorgrid
OPERATOR_NAMESPACE=tensorgrid-system
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -n1)"

log() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# create_cluster IMAGE: kind create cluster, asked again (up to 4 times) when a loaded 2-core
# machine made it miss a deadline: a node's systemd did not log that it booted within the 30 s
# kind allows (pkg/cluster/internal/providers/docker/provision.go), or kubeadm's calls to a
# starting API server timed out (its 10 s per request); kind removes the nodes before it says so.
create_cluster() {
  local attempt errors
  errors="$(mktemp)"
  for attempt in 1 2 3 4; do
    log "creating kind cluster $CLUSTER from $1 (attempt $attempt of 4)"
    if kind create cluster --name "$CLUSTER" --image "$1" --config "$(kind_config)" \
        --kubeconfig "$KUBECONFIG_PATH" --wait 5m 2>&1 | tee "$errors" >&2; then
      rm -f "$errors"
      return 0
    fi
    if ! grep -q -e "could not find a log line that matches" -e "error execution phase wait-control-plane" \
        "$errors" || [[ $attempt -eq 4 ]]; then
      rm -f "$errors"
      return 1
    fi
    log "a node did not boot, or the API server did not answer, in time (load average: $(cut -d' ' -f1-3 /proc/loadavg)); again"
  done
}
die() { log "ERROR: $*"; exit 1; }

# kind_config: kind-config.yaml with the directory every node mounts as /var/local-volumes (the
# default StorageClass's volumes, shared so that a volume follows its pod to another node);
# prints the path of the config written.
VOLUMES_DIR="$E2E_DIR/volumes"
kind_config() {
  mkdir -p "$VOLUMES_DIR"
  chmod 0777 "$VOLUMES_DIR"
  sed "s#@VOLUMES@#$VOLUMES_DIR#" "$HERE/kind-config.yaml" > "$E2E_DIR/kind-config.yaml"
  echo "$E2E_DIR/kind-config.yaml"
}

TOOLS_BIN="$("$REPO/hack/tools.sh" --print-bin-dir)"
K8S_BIN="$("$REPO/hack/build-kubernetes.sh" --print-bin-dir)"
export PATH="$TOOLS_BIN:$K8S_BIN:$PATH"

cluster_exists() { kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; }

load_images() {
  "$REPO/hack/build-images.sh" runtime operator
  log "loading tensorgrid:$VERSION and tensorgrid-operator:$VERSION into the nodes"
  # image-archive, not docker-image: the latter needs crictl in the node, which the
  # locally assembled node image does not have (e2e/node-image/build.sh).
  local archive="$E2E_DIR/images.tar"
  docker save -o "$archive" "${RUNTIME_IMAGE%:*}:$VERSION" "${OPERATOR_IMAGE%:*}:$VERSION"
  kind load image-archive --name "$CLUSTER" "$archive"
  rm -f "$archive"
}

# What `up` needs besides the cluster: tools, Docker's engine, Prometheus, the node image.
prerequisites() {
  "$REPO/hack/tools.sh" --with-kind
  "$REPO/hack/docker-engine.sh"
  # The metrics tests start a real Prometheus (Debian's package) against the cluster.
  if ! command -v prometheus > /dev/null; then
    log "installing prometheus (Debian's package) for the suite's metrics tests"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus > /dev/null 2>&1 \
      || { apt-get update -q > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
           --no-install-recommends prometheus > /dev/null; } || die "apt-get install prometheus failed"
  fi
  mkdir -p "$E2E_DIR"
  if [[ -z "${KIND_NODE_IMAGE:-}" ]]; then
    "$HERE/node-image/build.sh"
  fi
}

prepare() {
  local t0=$SECONDS
  prerequisites
  "$REPO/hack/build-images.sh" runtime operator
  log "prepared in $((SECONDS - t0))s: tools, Docker's engine, Prometheus, the node image, the images"
}

up() {
  local t0=$SECONDS node_image
  prerequisites
  if [[ -n "${KIND_NODE_IMAGE:-}" ]]; then
    node_image="$KIND_NODE_IMAGE"
  else
    node_image="$("$HERE/node-image/build.sh" --print-image)"
  fi
  local reused=0
  if cluster_exists; then
    reused=1
    log "cluster $CLUSTER exists; reusing it"
    kind export kubeconfig --name "$CLUSTER" --kubeconfig "$KUBECONFIG_PATH" > /dev/null
  else
    create_cluster "$node_image"
  fi
  export KUBECONFIG="$KUBECONFIG_PATH"
  kubectl wait --for=condition=Ready nodes --all --timeout=180s > /dev/null
  kubectl -n kube-system rollout status deployment/coredns --timeout=180s > /dev/null
  # kube-proxy and the pod network's NetworkPolicy enforcer (kube-network-policies, or
  # kindnetd on kind's own node images).
  local daemonset
  for daemonset in $(kubectl -n kube-system get daemonsets -o name); do
    kubectl -n kube-system rollout status "$daemonset" --timeout=180s > /dev/null
  done
  load_images
  # The suite's Prometheus runs on this machine (e2e/test_metrics.py), outside the cluster:
  # the chart lets its address on kind's network reach the training pods' metrics port,
  # as the chart's values say to admit a Prometheus outside the cluster.
  local prometheus_cidr
  prometheus_cidr="$(docker exec "$(kind get nodes --name "$CLUSTER" | head -n1)" ip -4 route show default \
    | awk '{print $3 "/32"; exit}')"
  [[ -n "$prometheus_cidr" ]] || die "no default route in the kind node: where does this machine sit on its network?"
  log "helm install $RELEASE charts/tensorgrid-operator (namespace $OPERATOR_NAMESPACE; Prometheus at $prometheus_cidr)"
  # The pods of a lost node (docs/operator.md, "Node loss") are replaced once they are 10 s past their
  # grace period, as docs/operator.md ("Node loss") advises where a node that stops answering
  # is gone for good, as a paused kind node is until the test resumes it; and the operator
  # runs on the control-plane node, as on a system node, so that losing a worker node never
  # takes the operator with it (its own pods would wait Kubernetes' 300 s to be evicted).
  # A cluster set up by an older chart, whose TrainingJob CRD the release did not own: handed to
  # the release as the chart's README says ("Upgrading"), or helm refuses the upgrade.
  if [[ $reused == 1 ]] && kubectl get crd trainingjobs.tensorgrid.io > /dev/null 2>&1; then
    kubectl label --overwrite crd trainingjobs.tensorgrid.io app.kubernetes.io/managed-by=Helm > /dev/null
    kubectl annotate --overwrite crd trainingjobs.tensorgrid.io meta.helm.sh/release-name="$RELEASE" \
      meta.helm.sh/release-namespace="$OPERATOR_NAMESPACE" > /dev/null
  fi
  helm upgrade --install "$RELEASE" "$REPO/charts/tensorgrid-operator" --namespace "$OPERATOR_NAMESPACE" \
    --create-namespace --wait --timeout 5m \
    --set-json "networkPolicy.extraMetricsPeers=[{\"ipBlock\": {\"cidr\": \"$prometheus_cidr\"}}]" \
    --set operator.forceDeleteStuckPods=true --set operator.stuckTerminatingSeconds=10 \
    --set-json 'nodeSelector={"node-role.kubernetes.io/control-plane": ""}' \
    --set-json 'tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]' \
    "${E2E_HELM_ARGS[@]}"
  if [[ $reused == 1 ]]; then restart_operator; fi
  log "cluster $CLUSTER ready in $((SECONDS - t0))s; KUBECONFIG=$KUBECONFIG_PATH"
}

# The images keep their tag (the version) when rebuilt, so a running operator does not pick
# up a new one by itself.
restart_operator() {
  local deployment
  deployment="$(kubectl -n "$OPERATOR_NAMESPACE" get deployment -l "app.kubernetes.io/instance=$RELEASE" -o name)"
  log "restarting $deployment on the new image"
  kubectl -n "$OPERATOR_NAMESPACE" rollout restart "$deployment" > /dev/null
  kubectl -n "$OPERATOR_NAMESPACE" rollout status "$deployment" --timeout=180s > /dev/null
}

down() {
  if command -v kind > /dev/null && cluster_exists; then
    log "deleting kind cluster $CLUSTER"
    kind delete cluster --name "$CLUSTER"
  fi
  rm -f "$KUBECONFIG_PATH" "$E2E_DIR/kind-config.yaml"
  rm -rf "$VOLUMES_DIR"
}

# Extra `helm install` arguments, e.g. E2E_HELM_ARGS="--set replicas=2".
read -r -a E2E_HELM_ARGS <<< "${E2E_HELM_ARGS:-}"

case "${1:-}" in
  up) up ;;
  prepare) prepare ;;
  down) down ;;
  images) cluster_exists || die "no cluster $CLUSTER (make e2e-up)"; export KUBECONFIG="$KUBECONFIG_PATH"
          load_images; restart_operator ;;
  *) echo "usage: e2e/cluster.sh up|prepare|down|images" >&2; exit 2 ;;
esac
