#!/usr/bin/env bash
# controlplane.sh: run a real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) on 127.0.0.1, without any kubelet.
#
# Why this exists: the operator's tests need a genuine API server (CRD schema
# and CEL validation, RBAC, garbage collection of ownerReferences, namespace
# deletion), which fakes do not give, and no container registry is reachable
# here, so kind cannot pull images. The binaries come from
# hack/build-kubernetes.sh (built from source, cached outside the repo).
#
# Usage: hack/controlplane.sh up|down|status [DIR]
#   up      start everything (a fresh, empty cluster each time), wait for
#           /readyz and for the default namespace and service account, then
#           print the admin kubeconfig path (DIR/kubeconfig)
#   down    stop every component started from DIR; safe to call repeatedly
#   status  show which components run and whether the API server is ready
# DIR holds all state: certificates, etcd data, kubeconfigs, PID files, logs.
# It defaults to .cache/controlplane under the repository root.
#
# Environment: TENSORGRID_CACHE and KUBERNETES_VERSION as for
# build-kubernetes.sh; CONTROLPLANE_TIMEOUT (seconds to wait for each step,
# default 180).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/.." && pwd)"

cmd="${1:-}"
DIR="${2:-$REPO_ROOT/.cache/controlplane}"
TIMEOUT="${CONTROLPLANE_TIMEOUT:-180}"
# Start order; down stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)

log() { printf '[controlplane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# --- processes -----------------------------------------------------------------

# pid_of NAME: the PID recorded for NAME if that process is still the binary
# we started (guards against a recycled PID), else nothing.
pid_of() {
  local f="$DIR/run/$1.pid" pid exe
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ && -d /proc/$pid ]] || return 0
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  [[ "${exe##*/}" == "$1" || "${exe##*/}" == "$1 (deleted)" ]] || return 0
  echo "$pid"
}

# start NAME ARGS...: run $BIN/NAME in its own session (so it outlives this
# script and the caller's process group), logging to DIR/logs/NAME.log.
start() {
  local name="$1"
  shift
  log "starting $name"
  # bash writes its own PID, then execs the binary under that same PID.
  # shellcheck disable=SC2016  # $$ and $@ are for the inner bash
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$DIR/run/$name.pid" "$BIN/$name" "$@" \
    > "$DIR/logs/$name.log" 2>&1 < /dev/null &
  local i
  for i in $(seq 50); do
    [[ -n "$(pid_of "$name")" ]] && return 0
    sleep 0.1
  done
  tail -n 20 "$DIR/logs/$name.log" >&2 || true
  die "$name did not start"
}

all_running() {
  local name
  for name in "${COMPONENTS[@]}"; do
    [[ -n "$(pid_of "$name")" ]] || return 1
  done
}

stop_all() {
  local name pid pids=() i
  for (( i=${#COMPONENTS[@]}-1; i>=0; i-- )); do
    name="${COMPONENTS[$i]}"
    pid="$(pid_of "$name")"
    if [[ -n "$pid" ]]; then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      # Stop the clients before etcd so the API server shuts down cleanly.
      [[ "$name" == etcd ]] || wait_gone "$pid" 15
    fi
  done
  for pid in "${pids[@]}"; do wait_gone "$pid" 15; done
  rm -f "$DIR"/run/*.pid
}

# wait_gone PID SECONDS: wait for PID to exit, SIGKILL it after SECONDS.
wait_gone() {
  local pid="$1" n=$(( $2 * 10 ))
  while [[ -d /proc/$1 ]] && (( n-- > 0 )); do
    # A zombie whose parent has not reaped it yet counts as gone.
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && return 0
    sleep 0.1
  done
  if [[ -d /proc/$pid ]]; then
    log "pid $pid still running, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

# --- certificates and kubeconfigs ----------------------------------------------

# sign NAME SUBJECT EXTENSIONS [CA]: key + certificate signed by CA (default ca).
sign() {
  local name="$1" subj="$2" ext="$3" ca="${4:-ca}" pki="$DIR/pki"
  openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  printf '%b\n' "$ext" > "$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

# Bump when the set of files changes, so older DIRs get regenerated.
PKI_LAYOUT=2

make_pki() {
  local pki="$DIR/pki"
  if [[ "$(cat "$pki/.complete" 2>/dev/null)" == "$PKI_LAYOUT" ]]; then return 0; fi
  log "generating certificates in $pki"
  rm -rf "$pki"; mkdir -p "$pki"; chmod 700 "$pki"
  cat > "$pki/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
[dn]
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, digitalSignature, keyEncipherment, keyCertSign
subjectKeyIdentifier = hash
EOF
  local ca
  # ca signs the serving and client certificates; front-proxy-ca only the
  # client certificate the API server uses towards aggregated API servers
  # (kept apart as kubeadm does: that CA's certificates may assert any user).
  for ca in ca front-proxy-ca; do
    openssl genrsa -out "$pki/$ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$pki/$ca.key" -subj "/CN=tensorgrid-controlplane-$ca" \
      -days 3650 -sha256 -config "$pki/ca.cnf" -extensions v3_ca -out "$pki/$ca.crt"
  done
  local client='basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
  sign apiserver "/CN=kube-apiserver" \
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign admin "/O=system:masters/CN=kubernetes-admin" "$client"
  sign kube-controller-manager "/CN=system:kube-controller-manager" "$client"
  sign kube-scheduler "/CN=system:kube-scheduler" "$client"
  sign front-proxy-client "/CN=front-proxy-client" "$client" front-proxy-ca
  # Service-account token signing pair (API server verifies, signs; KCM signs).
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
  echo "$PKI_LAYOUT" > "$pki/.complete"
}

# write_kubeconfig FILE USER: kubeconfig with embedded credentials.
write_kubeconfig() {
  local file="$1" user="$2" pki="$DIR/pki"
  cat > "$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tensorgrid
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 < "$pki/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 < "$pki/$user.crt")
    client-key-data: $(base64 -w0 < "$pki/$user.key")
contexts:
- name: tensorgrid
  context:
    cluster: tensorgrid
    user: $user
current-context: tensorgrid
EOF
  chmod 600 "$file.tmp"
  mv -f "$file.tmp" "$file"
}

# free_ports N: N distinct free TCP ports on 127.0.0.1.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" --request-timeout=5s "$@"; }

# wait_for WHAT CMD...: poll CMD until it succeeds or TIMEOUT expires.
wait_for() {
  local what="$1"
  shift
  local deadline=$(( SECONDS + TIMEOUT ))
  until "$@" > /dev/null 2>&1; do
    if (( SECONDS >= deadline )); then
      log "timed out after ${TIMEOUT}s waiting for $what; last log lines:"
      for name in "${COMPONENTS[@]}"; do
        echo "--- $name ---" >&2
        tail -n 15 "$DIR/logs/$name.log" >&2 2>/dev/null || true
      done
      return 1
    fi
    local name
    for name in "${COMPONENTS[@]}"; do
      if [[ -f "$DIR/run/$name.pid" && -z "$(pid_of "$name")" ]]; then
        log "$name exited while waiting for $what; last log lines:"
        tail -n 30 "$DIR/logs/$name.log" >&2 || true
        return 1
      fi
    done
    sleep 0.5
  done
}

healthz() { curl -fsk --max-time 3 "https://127.0.0.1:$1/healthz"; }
readyz() { [[ "$(kubectl_admin get --raw=/readyz 2>/dev/null)" == ok ]]; }
etcd_healthy() { curl -fs --max-time 3 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }

# --- commands --------------------------------------------------------------------

find_binaries() {
  BIN="$("$HERE/build-kubernetes.sh" --print-bin-dir)"
  # Idempotent and quick when the cached binaries are current.
  "$HERE/build-kubernetes.sh"
}

cmd_up() {
  local t0=$SECONDS
  for tool in openssl curl python3 base64 setsid; do
    command -v "$tool" > /dev/null || die "$tool is required"
  done
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
  # State never belongs in git, wherever DIR is.
  [[ -f "$DIR/.gitignore" ]] || echo '*' > "$DIR/.gitignore"

  if [[ -f "$DIR/ports.env" ]] && all_running; then
    # shellcheck disable=SC1091
    source "$DIR/ports.env"
    BIN="$("$HERE/build-kubernetes.sh" --print-bin-dir)"
    if readyz; then
      log "control plane already running"
      echo "$DIR/kubeconfig"
      return 0
    fi
  fi
  # Leftovers of an earlier run (crashed, or half up): clear them.
  stop_all
  # Whatever fails from here on, leave no half-started control plane behind.
  trap 'rc=$?; if [[ $rc != 0 ]]; then log "start-up failed; stopping what was started (logs: $DIR/logs)"; stop_all; fi' EXIT

  find_binaries
  log "Kubernetes $("$BIN/kube-apiserver" --version | awk '{print $2}'), $("$BIN/etcd" --version | head -n1)"

  SERVICE_CIDR=10.96.0.0/16
  SERVICE_IP=10.96.0.1
  mkdir -p "$DIR/run" "$DIR/logs" "$DIR/config"
  make_pki

  read -r ETCD_PORT ETCD_PEER_PORT API_PORT KCM_PORT SCHED_PORT <<< "$(free_ports 5)"
  cat > "$DIR/ports.env" <<EOF
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
API_PORT=$API_PORT
KCM_PORT=$KCM_PORT
SCHED_PORT=$SCHED_PORT
EOF
  write_kubeconfig "$DIR/kubeconfig" admin
  write_kubeconfig "$DIR/config/kube-controller-manager.kubeconfig" kube-controller-manager
  write_kubeconfig "$DIR/config/kube-scheduler.kubeconfig" kube-scheduler

  # A fresh cluster every time: tests must not see objects of an earlier run.
  rm -rf "$DIR/etcd"
  # --unsafe-no-fsync: the data is thrown away anyway, and fsync is slow on VMs.
  start etcd \
    --name=tensorgrid \
    --data-dir="$DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="tensorgrid=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync \
    --log-level=warn
  wait_for "etcd /health" etcd_healthy

  local pki="$DIR/pki"
  # OwnerReferencesPermissionEnforcement (on top of the default plugins), as OpenShift and
  # hardened clusters enable it: setting blockOwnerDeletion on an owner reference needs
  # `update` on the owner's finalizers subresource, so the chart's RBAC is tested with it.
  # --endpoint-reconciler-type=none: Endpoints may not hold a loopback address,
  # so the "kubernetes" service stays without endpoints (no pod runs here to
  # use it); otherwise the API server logs a sync error every 10 seconds.
  start kube-apiserver \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$API_PORT" \
    --tls-cert-file="$pki/apiserver.crt" \
    --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --authorization-mode=RBAC \
    --enable-admission-plugins=OwnerReferencesPermissionEnforcement \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.crt" \
    --proxy-client-key-file="$pki/front-proxy-client.key" \
    --allow-privileged=true \
    --endpoint-reconciler-type=none \
    --cert-dir="$DIR/pki/apiserver-generated"
  wait_for "kube-apiserver /readyz" readyz

  start kube-controller-manager \
    --kubeconfig="$DIR/config/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$DIR/config/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$DIR/config/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$KCM_PORT" \
    --cert-dir="$DIR/pki/kube-controller-manager-generated" \
    --leader-elect=false \
    --controllers='*' \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" \
    --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" \
    --cluster-signing-key-file="$pki/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR"

  cat > "$DIR/config/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $DIR/config/kube-scheduler.kubeconfig
leaderElection:
  leaderElect: false
EOF
  start kube-scheduler \
    --config="$DIR/config/kube-scheduler.yaml" \
    --authentication-kubeconfig="$DIR/config/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$DIR/config/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$SCHED_PORT" \
    --cert-dir="$DIR/pki/kube-scheduler-generated"

  wait_for "kube-controller-manager /healthz" healthz "$KCM_PORT"
  wait_for "kube-scheduler /healthz" healthz "$SCHED_PORT"
  wait_for "namespace default" kubectl_admin get namespace default
  wait_for "serviceaccount default/default" kubectl_admin -n default get serviceaccount default

  log "control plane ready in $((SECONDS - t0))s: https://127.0.0.1:$API_PORT"
  log "export KUBECONFIG=$DIR/kubeconfig"
  trap - EXIT
  echo "$DIR/kubeconfig"
}

cmd_down() {
  if [[ ! -d "$DIR/run" ]]; then
    log "nothing to stop in $DIR"
    return 0
  fi
  DIR="$(cd "$DIR" && pwd)"
  local name running=0
  for name in "${COMPONENTS[@]}"; do
    [[ -z "$(pid_of "$name")" ]] || running=1
  done
  stop_all
  if [[ $running == 1 ]]; then
    log "stopped; logs and certificates stay in $DIR (the next up starts an empty cluster)"
  else
    log "nothing running in $DIR"
  fi
}

cmd_status() {
  local name pid rc=0
  if [[ ! -d "$DIR/run" ]]; then
    echo "not running (no $DIR/run)"
    return 3
  fi
  for name in "${COMPONENTS[@]}"; do
    pid="$(pid_of "$name")"
    if [[ -n "$pid" ]]; then
      printf '%-24s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-24s stopped\n' "$name"
      rc=3
    fi
  done
  if [[ $rc == 0 ]]; then
    # shellcheck disable=SC1091
    source "$DIR/ports.env"
    BIN="$("$HERE/build-kubernetes.sh" --print-bin-dir)"
    if readyz; then
      echo "apiserver                https://127.0.0.1:$API_PORT ready"
    else
      echo "apiserver                https://127.0.0.1:$API_PORT NOT ready"
      rc=1
    fi
    echo "kubeconfig               $DIR/kubeconfig"
  fi
  return $rc
}

case "$cmd" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) usage ;;
esac
