#!/usr/bin/env bash
# docker-engine.sh: make sure a Docker engine runs on this machine, installing and
# starting one if needed. Idempotent: on a machine where `docker info` already
# answers it returns at once.
#
# Why this exists: CI runs on a fresh VM without a Docker engine and without
# systemd, so `make images` has to install Debian's docker.io and start dockerd by
# hand (see ../shared/ENVIRONMENT.md). No registry is reachable there: CI builds the
# images from local base images (`make images OFFLINE_BASES=1`, hack/base-images.sh).
#
# Usage: hack/docker-engine.sh [--print-docker | --stop]
#   --print-docker  print the docker client to use (after making sure the engine runs)
#   --stop          stop the dockerd this script started (CI leaves nothing running);
#                   an engine started otherwise is left alone
#
# Environment:
#   DOCKER_ENGINE_TIMEOUT  seconds to wait for dockerd to answer (default 90)
#   DOCKERD_LOG            dockerd's log file (default /var/log/tensorgrid-dockerd.log)
# Needs root to install and start the engine (CI runs as root).
# Where this machine's capability bounding set is incomplete (these VMs lack
# CAP_SYS_RESOURCE), hack/runc-capfilter becomes Docker's default runtime, so that
# privileged containers (kind's nodes) start.
set -euo pipefail

TIMEOUT="${DOCKER_ENGINE_TIMEOUT:-90}"
LOG="${DOCKERD_LOG:-/var/log/tensorgrid-dockerd.log}"
DAEMON_JSON=/etc/docker/daemon.json
CAPFILTER=/usr/local/sbin/runc-capfilter
# The PID of the dockerd this script started.
STARTED=/run/tensorgrid-dockerd.pid

log() { printf '[docker-engine %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

print_docker=0
stop=0
for arg in "$@"; do
  case "$arg" in
    --print-docker) print_docker=1 ;;
    --stop) stop=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

# The client shipped with the engine speaks its API version and uses the builder
# the scripts expect; any other `docker` on PATH is a fallback.
docker_client() {
  if [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker; else command -v docker || true; fi
}

# dockerd_pid PIDFILE: the PID in PIDFILE if that process is a dockerd (not a recycled PID).
dockerd_pid() {
  local pid
  pid="$(cat "$1" 2>/dev/null || true)"
  if [[ "$pid" =~ ^[0-9]+$ && "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */dockerd ]]; then echo "$pid"; fi
}

engine_answers() {
  local docker
  docker="$(docker_client)"
  [[ -n "$docker" ]] && timeout 10 "$docker" info > /dev/null 2>&1
}

install_engine() {
  [[ $EUID == 0 ]] || die "dockerd is not installed; run as root (or: apt-get install docker.io)"
  log "installing docker.io (Debian's Docker engine)"
  export DEBIAN_FRONTEND=noninteractive
  # Package lists may be missing or stale on a fresh machine: refresh once, then install.
  if ! apt-get install -y --no-install-recommends docker.io > /tmp/tensorgrid-apt.log 2>&1; then
    apt-get update > /tmp/tensorgrid-apt.log 2>&1 || { cat /tmp/tensorgrid-apt.log >&2; die "apt-get update failed"; }
    apt-get install -y --no-install-recommends docker.io > /tmp/tensorgrid-apt.log 2>&1 \
      || { tail -n 30 /tmp/tensorgrid-apt.log >&2; die "apt-get install docker.io failed"; }
  fi
}

# True when this machine's capability bounding set lacks one of capabilities 0..40, so
# that privileged containers (kind's nodes) need hack/runc-capfilter.
caps_missing() {
  local bounding
  bounding="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
  (( (0x$bounding & 0x1ffffffffff) != 0x1ffffffffff ))
}

# hack/runc-capfilter as Docker's default runtime, where capabilities are missing.
install_capfilter() {
  command -v jq > /dev/null || apt-get install -y -q jq > /tmp/tensorgrid-apt.log 2>&1 \
    || { apt-get update -q > /tmp/tensorgrid-apt.log 2>&1 && apt-get install -y -q jq > /tmp/tensorgrid-apt.log 2>&1; } \
    || die "apt-get install jq failed (hack/runc-capfilter needs it)"
  install -m 0755 "$(dirname "$0")/runc-capfilter" "$CAPFILTER"
}

# Merge our settings into daemon.json without dropping keys another tool wrote:
# only missing keys are set, except the capability filter runtime, which must be the default.
write_daemon_config() {
  mkdir -p "$(dirname "$DAEMON_JSON")"
  python3 - "$DAEMON_JSON" "$1" <<'EOF'
import json, os, sys
path, capfilter = sys.argv[1], sys.argv[2]
config = {}
if os.path.exists(path) and os.path.getsize(path) > 0:
    with open(path) as f:
        config = json.load(f)
# Bounded logs: smoke tests run training containers that print progress. The storage
# driver is left to dockerd (overlay2 here).
wanted = {
    "log-driver": "json-file",
    "log-opts": {"max-size": "10m", "max-file": "2"},
}
changed = False
for key, value in wanted.items():
    if key not in config:
        config[key] = value
        changed = True
if capfilter:
    runtimes = config.setdefault("runtimes", {})
    if runtimes.get("tensorgrid-runc") != {"path": capfilter} or config.get("default-runtime") != "tensorgrid-runc":
        runtimes["tensorgrid-runc"] = {"path": capfilter}
        config["default-runtime"] = "tensorgrid-runc"
        changed = True
print("changed" if changed else "same")
if changed or not os.path.exists(path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
EOF
}

start_engine() {
  [[ $EUID == 0 ]] || die "dockerd is not running; start it as root"
  local pid
  pid="$(dockerd_pid /var/run/docker.pid)"
  if [[ -n "$pid" ]]; then
    log "dockerd (pid $pid) runs but does not answer yet; waiting"
  else
    rm -f /var/run/docker.pid
    log "starting dockerd (log: $LOG)"
    # Its own session, so it outlives this script and the caller's process group;
    # setsid execs dockerd in this background job, so $! is dockerd's PID.
    setsid dockerd --config-file "$DAEMON_JSON" > "$LOG" 2>&1 < /dev/null &
    echo $! > "$STARTED"
  fi
  local deadline=$(( SECONDS + TIMEOUT ))
  until engine_answers; do
    if (( SECONDS >= deadline )); then
      tail -n 30 "$LOG" >&2 || true
      die "dockerd did not answer within ${TIMEOUT}s"
    fi
    sleep 0.5
  done
}

stop_engine() {
  local pid
  pid="$(dockerd_pid "$STARTED")"
  rm -f "$STARTED"
  [[ -n "$pid" ]] || return 0
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  local deadline=$(( SECONDS + 30 ))
  while (( SECONDS < deadline )); do
    [[ -d /proc/$pid ]] || return 0
    sleep 0.1
  done
  die "dockerd (pid $pid) did not stop within 30s"
}

if [[ $stop == 1 ]]; then
  stop_engine
  exit 0
fi

t0=$SECONDS
capfilter=""
if caps_missing && [[ $EUID == 0 ]]; then
  install_capfilter
  capfilter="$CAPFILTER"
fi
if ! engine_answers; then
  command -v dockerd > /dev/null || install_engine
  write_daemon_config "$capfilter" > /dev/null
  start_engine
  log "Docker engine $("$(docker_client)" version --format '{{.Server.Version}}') ready in $((SECONDS - t0))s"
elif [[ -n "$capfilter" && "$(write_daemon_config "$capfilter")" == changed ]]; then
  # dockerd reloads runtimes and default-runtime on SIGHUP.
  pid="$(pgrep -xo dockerd || true)"
  [[ -n "$pid" ]] || die "a Docker engine answers but no dockerd process was found to reload $DAEMON_JSON"
  log "reloading dockerd (pid $pid): runc-capfilter as default runtime (capabilities missing here)"
  kill -HUP "$pid"
  sleep 1
fi
if [[ $print_docker == 1 ]]; then docker_client; fi
