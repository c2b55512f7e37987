#!/usr/bin/env bash
# build.sh: assemble the kind node image from what is built on this machine.
#
# Why this exists: kind's published node images come from a registry, and `kind build
# node-image` fetches etcd, CoreDNS, pause, kindnetd and local-path images from
# registries whatever its --type; these machines reach none. So the node is made here:
#   - the rootfs: Debian's systemd, containerd, runc, CNI plugins and iptables
#     (Dockerfile), and this folder's rootfs/ (entrypoint, kubelet unit, containerd and
#     CNI config, default StorageClass);
#   - kubeadm, kubelet and kubectl from hack/build-kubernetes.sh --with-node (no crictl:
#     the module proxy does not serve cri-tools; e2e/cluster.sh loads images with
#     `kind load image-archive`, which needs only ctr);
#   - the control-plane images, tagged exactly as `kubeadm config images list` prints:
#     kube-apiserver, kube-controller-manager, kube-scheduler and etcd from the same
#     build, kube-proxy on Debian with iptables, CoreDNS built with `go install`, and
#     a pause built from images/pause.c. They are saved into the node image and loaded
#     into containerd at boot (tensorgrid-images.service), before the kubelet starts.
# The pod network is a ptp CNI config of our own (one node; the kind config sets
# disableDefaultCNI); the default StorageClass is served by a small provisioner of ours
# (rootfs/usr/local/bin/tensorgrid-local-volumes), as kind's local-path provisioner would.
#
# Cached: the image tag carries a hash of every input (this folder, the versions, the
# capability filter), so an unchanged recipe is not rebuilt; binaries are cached in
# $TENSORGRID_CACHE/kind-node by version.
#
# Usage: e2e/node-image/build.sh [--print-image]
#   --print-image  print the node image's name and exit (builds nothing)
# Environment: TENSORGRID_CACHE (default ~/.cache/tensorgrid), KUBERNETES_VERSION
# (default: hack/build-kubernetes.sh's), GO.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=hack/images.env
source "$REPO/hack/images.env"
CACHE="${TENSORGRID_CACHE:-$HOME/.cache/tensorgrid}"
K8S_BIN="$("$REPO/hack/build-kubernetes.sh" --print-bin-dir)"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-$(basename "$(dirname "$K8S_BIN")")}"
TOOLS="$CACHE/kind-node/bin"

log() { printf '[node-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The tag: Kubernetes version plus a hash of every input of the recipe.
recipe_hash() {
  (
    cd "$REPO"
    find e2e/node-image -type f | LC_ALL=C sort | xargs sha256sum
    sha256sum hack/runc-capfilter
    echo "$KUBERNETES_VERSION $OS_BASE_IMAGE"
  ) | sha256sum | cut -c1-10
}
NODE_IMAGE="${KIND_NODE_IMAGE:-tensorgrid/kind-node:$KUBERNETES_VERSION-$(recipe_hash)}"

case "${1:-}" in
  --print-image) echo "$NODE_IMAGE"; exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument: $1" ;;
esac

DOCKER="$("$REPO/hack/docker-engine.sh" --print-docker)"
if "$DOCKER" image inspect "$NODE_IMAGE" > /dev/null 2>&1; then
  log "$NODE_IMAGE already built (nothing to do)"
  exit 0
fi
t0=$SECONDS
"$REPO/hack/base-images.sh"
"$REPO/hack/build-kubernetes.sh" --with-node

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=
mkdir -p "$TOOLS"
go_install() {  # name module-path version
  local name="$1" module="$2" version="$3"
  if [[ -x "$TOOLS/$name" && "$(cat "$TOOLS/.$name.stamp" 2>/dev/null)" == "$version" ]]; then return 0; fi
  log "building $name $version (go install $module)"
  GOBIN="$TOOLS" nice -n 10 "$GO" install -trimpath -ldflags "-s -w" "$module@$version"
  echo "$version" > "$TOOLS/.$name.stamp"
}

# The images kubeadm will ask for, e.g. registry.k8s.io/coredns/coredns:v1.12.1.
mapfile -t wanted < <("$K8S_BIN/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null)
[[ ${#wanted[@]} -ge 6 ]] || die "kubeadm config images list printed: ${wanted[*]:-nothing}"
image_for() {  # component -> full tag
  local ref
  for ref in "${wanted[@]}"; do
    case "${ref%:*}" in */"$1") echo "$ref"; return 0 ;; esac
  done
  die "kubeadm lists no image for $1 (${wanted[*]})"
}
coredns_image="$(image_for coredns)"
pause_image="$(image_for pause)"
go_install coredns github.com/coredns/coredns "${coredns_image##*:}"

context="$CACHE/kind-node/context"
rm -rf "$context"
mkdir -p "$context/bin" "$context/images" "$context/work"
cp -a "$HERE/Dockerfile" "$HERE/rootfs" "$context/"
cp "$REPO/hack/runc-capfilter" "$context/runc-capfilter"
sed -i "s#@PAUSE_IMAGE@#$pause_image#" "$context/rootfs/etc/containerd/config.toml"
cp "$K8S_BIN/kubeadm" "$K8S_BIN/kubelet" "$K8S_BIN/kubectl" "$context/bin/"

# build_image TAG BASE FILE:DEST... [-- RUN-COMMAND]: an image of static files.
build_image() {
  local tag="$1" base="$2" dir entry
  shift 2
  dir="$context/work/$(echo "$tag" | tr '/:' '__')"
  mkdir -p "$dir"
  {
    echo "FROM $base"
    echo "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  } > "$dir/Dockerfile"
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    cp "${1%%:*}" "$dir/$(basename "${1#*:}")"
    echo "COPY $(basename "${1#*:}") ${1#*:}" >> "$dir/Dockerfile"
    entry="${1#*:}"
    shift
  done
  if [[ "${1:-}" == "--" ]]; then
    echo "RUN $2" >> "$dir/Dockerfile"
  fi
  echo "ENTRYPOINT [\"$entry\"]" >> "$dir/Dockerfile"
  "$DOCKER" build -q -t "$tag" "$dir" > /dev/null
  "$DOCKER" save -o "$context/images/$(echo "${tag%:*}" | tr '/' '_').tar" "$tag"
  log "image $tag"
}

log "control-plane images for Kubernetes $KUBERNETES_VERSION"
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  build_image "$(image_for "$component")" scratch "$K8S_BIN/$component:/usr/local/bin/$component"
done
build_image "$(image_for etcd)" scratch "$K8S_BIN/etcd:/usr/local/bin/etcd"
build_image "$coredns_image" scratch "$TOOLS/coredns:/coredns"
gcc -static -Os -o "$context/work/pause" "$HERE/images/pause.c"
build_image "$pause_image" scratch "$context/work/pause:/pause"
build_image "$(image_for kube-proxy)" "$OS_BASE_IMAGE" \
  "$K8S_BIN/kube-proxy:/usr/local/bin/kube-proxy.real" \
  "$HERE/rootfs/usr/local/bin/select-iptables-backend:/usr/local/bin/select-iptables-backend" \
  "$HERE/images/kube-proxy-wrapper:/usr/local/bin/kube-proxy" \
  -- "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iptables conntrack > /dev/null && rm -rf /var/lib/apt/lists/* && chmod 0755 /usr/local/bin/kube-proxy /usr/local/bin/select-iptables-backend"
rm -rf "$context/work"

log "building $NODE_IMAGE"
"$DOCKER" build -q -t "$NODE_IMAGE" --build-arg "BASE_IMAGE=$OS_BASE_IMAGE" \
  --build-arg "KUBERNETES_VERSION=$KUBERNETES_VERSION" "$context" > /dev/null
rm -rf "$context"
log "$NODE_IMAGE ready in $((SECONDS - t0))s ($("$DOCKER" image inspect -f '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
