#!/usr/bin/env bash
# base-images.sh: make the local base images that docker/*.Dockerfile build FROM with
# TENSORGRID_OFFLINE_BASES=1 (`make images OFFLINE_BASES=1`, as CI does), and the base of
# the kind node image of the end-to-end suite.
#
# Why this exists: no container registry is reachable on the project's machines, so
# python:3.11-slim cannot be pulled there. Instead a Debian bookworm root file system is
# made with debootstrap (minbase) and imported with `docker import`; the Dockerfiles stay
# standard and get the local image through --build-arg BASE_IMAGE=...
#
# Two images (names in hack/images.env):
#   $OS_BASE_IMAGE            Debian minbase and the host's CA bundle, no Python: stands
#                             in for bases without Python, such as NVIDIA's CUDA images
#   $LOCAL_PYTHON_BASE_IMAGE  the same plus Debian's python3 (3.11) and python3-venv:
#                             stands in for python:3.11-slim
# The host's CA bundle is baked in (and named in /etc/pip.conf) because pip inside
# a build reaches PyPI only if it trusts that bundle.
#
# Cached: an image that exists is not made again (the tag carries BASE_RECIPE),
# and the debootstrap tarball is kept in $TENSORGRID_CACHE/base-images so a wiped
# Docker store is refilled in seconds.
#
# Usage: hack/base-images.sh [--force]
#   --force  make the images again even if they exist
# Environment: TENSORGRID_CACHE (default ~/.cache/tensorgrid), DEBIAN_MIRROR
# (default: the Debian mirror of this machine's apt sources), CA_BUNDLE (default
# /etc/ssl/certs/ca-certificates.crt), names as in hack/images.env.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/images.env
source "$HERE/images.env"
CACHE="${TENSORGRID_CACHE:-$HOME/.cache/tensorgrid}/base-images/$DEBIAN_SUITE-r$BASE_RECIPE"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

log() { printf '[base-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

DOCKER="$("$HERE/docker-engine.sh" --print-docker)"

have_image() { "$DOCKER" image inspect "$1" > /dev/null 2>&1; }

if [[ $force == 0 ]] && have_image "$OS_BASE_IMAGE" && have_image "$LOCAL_PYTHON_BASE_IMAGE"; then
  exit 0
fi

# The first Debian (not security) mirror of this machine's apt sources.
debian_mirror() {
  local uri
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    uri="$(awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/debian.sources | grep -v -- '-security' | head -n1)"
  fi
  if [[ -z "${uri:-}" && -f /etc/apt/sources.list ]]; then
    uri="$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list)"
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

LABELS=(
  --change "LABEL org.opencontainers.image.title=tensorgrid-local-base"
  --change "LABEL org.opencontainers.image.description=\"Debian $DEBIAN_SUITE minbase and the host CA bundle, made by hack/base-images.sh\""
  --change "LABEL io.tensorgrid.base-recipe=$BASE_RECIPE"
)

make_os_tarball() {
  local tarball="$CACHE/debian-minbase.tar" rootfs="$CACHE/rootfs"
  if [[ $force == 0 && -s "$tarball" ]]; then return 0; fi
  [[ $EUID == 0 ]] || die "debootstrap needs root"
  [[ -s "$CA_BUNDLE" ]] || die "no CA bundle at $CA_BUNDLE"
  if ! command -v debootstrap > /dev/null; then
    log "installing debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends debootstrap > /dev/null 2>&1 \
      || { apt-get update > /dev/null && apt-get install -y --no-install-recommends debootstrap > /dev/null; }
  fi
  local mirror t0=$SECONDS
  mirror="$(debian_mirror)"
  log "debootstrap --variant=minbase $DEBIAN_SUITE from $mirror"
  rm -rf "$rootfs"
  mkdir -p "$CACHE"
  if ! debootstrap --variant=minbase "$DEBIAN_SUITE" "$rootfs" "$mirror" > "$CACHE/debootstrap.log" 2>&1; then
    tail -n 30 "$CACHE/debootstrap.log" >&2
    cat "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    die "debootstrap failed (log: $CACHE/debootstrap.log)"
  fi
  log "debootstrap done in $((SECONDS - t0))s"
  # The bundle this machine trusts (its HTTPS may go through an intercepting proxy).
  # Installing Debian's ca-certificates in an image (python3-venv pulls it in)
  # regenerates /etc/ssl/certs/ca-certificates.crt from /usr/local/share/ca-certificates:
  # so copy the host's local CAs there too, and give pip a copy no package rewrites.
  install -D -m 0644 "$CA_BUNDLE" "$rootfs/etc/ssl/certs/ca-certificates.crt"
  install -D -m 0644 "$CA_BUNDLE" "$rootfs/etc/ssl/host-ca-bundle.crt"
  mkdir -p "$rootfs/usr/local/share/ca-certificates"
  if compgen -G '/usr/local/share/ca-certificates/*.crt' > /dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  fi
  printf '[global]\ncert = /etc/ssl/host-ca-bundle.crt\n' > "$rootfs/etc/pip.conf"
  # What a container base does not need: package caches, docs, the host's resolver.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/var/log/* "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname
  # Keep them out of later package installs too, as Docker's official Debian images do.
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker-minimal" <<'EOF'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv -f "$tarball.tmp" "$tarball"
  rm -rf "$rootfs"
}

make_os_image() {
  if [[ $force == 0 ]] && have_image "$OS_BASE_IMAGE"; then return 0; fi
  make_os_tarball
  log "importing $OS_BASE_IMAGE"
  "$DOCKER" import "${LABELS[@]}" --change 'CMD ["/bin/bash"]' "$CACHE/debian-minbase.tar" "$OS_BASE_IMAGE" > /dev/null
}

make_python_image() {
  if [[ $force == 0 ]] && have_image "$LOCAL_PYTHON_BASE_IMAGE"; then return 0; fi
  log "building $LOCAL_PYTHON_BASE_IMAGE (python3 and python3-venv from $DEBIAN_SUITE)"
  # No build context; apt inside the container uses the image's own sources.list.
  DOCKER_BUILDKIT=0 "$DOCKER" build --quiet -t "$LOCAL_PYTHON_BASE_IMAGE" - > /dev/null <<EOF
FROM $OS_BASE_IMAGE
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
LABEL org.opencontainers.image.title=tensorgrid-local-python \\
      org.opencontainers.image.description="Debian $DEBIAN_SUITE minbase with python3 and venv, made by hack/base-images.sh"
CMD ["python3"]
EOF
}

t0=$SECONDS
make_os_image
make_python_image
log "base images ready in $((SECONDS - t0))s: $OS_BASE_IMAGE, $LOCAL_PYTHON_BASE_IMAGE"
