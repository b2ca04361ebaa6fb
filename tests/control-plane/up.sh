#!/usr/bin/env bash
# Starts a local Kubernetes control plane (etcd + kube-apiserver) with its state
# under DIR, returns once /readyz is OK, and prints the admin kubeconfig's path
# (DIR/kubeconfig) as the last line of stdout.
#
#   up.sh DIR         start what is not running (a stopped component restarts on its
#                     old ports and data, so the kubeconfig stays valid)
#   up.sh --node DIR  a full single-node cluster (the first start of DIR decides):
#                     also kube-controller-manager, kube-scheduler, containerd, kubelet
#                     and kube-proxy (node.sh); returns once the Node is Ready and
#                     writes DIR/node.env (CONTAINERD_ADDRESS, PAUSE_IMAGE: an image any
#                     pod can run with pull policy Never, NODE_NAME, NODE_IP). Needs
#                     root; one node per machine. The aggregation layer is configured
#                     (front-proxy certificates; APIServices reach their endpoints
#                     directly).
#   down.sh DIR       stop everything and undo what the node changed on the machine
#
# Without --node: loopback only, TLS serving certificate for 127.0.0.1 and localhost,
# an admin client certificate (group system:masters), RBAC authorization,
# service-account token signing keys; no controllers: no garbage collection, namespaces
# never finish terminating, no default ServiceAccounts. With --node, the API server
# also listens on the machine's address (pods reach it through the `kubernetes`
# Service), authorizes kubelets with the Node authorizer, and admits ServiceAccounts.
#
# Environment:
#   TIDAL_CONTROL_PLANE_BIN  directory with etcd and kube-apiserver (default: what
#                            provision.sh prints, building them if needed)
#   TIDAL_READY_TIMEOUT      seconds to wait for each component (default 90)
#   TIDAL_NODE_OWNER         --node: the pid the node belongs to (default: up.sh's
#                            caller). Another up.sh --node waits while that process
#                            runs (or a down.sh tears the node down), at most
#                            TIDAL_NODE_WAIT seconds (default 1800), and stops a node
#                            that outlived its owner
#   TIDAL_HPA_SYNC_PERIOD    --node: kube-controller-manager's HPA sync period (default
#                            2s, so that tests see HPAs act quickly; Kubernetes' is 15s)
#   TIDAL_TRACING_ENDPOINT   host:port of an OTLP/gRPC collector: kube-apiserver and
#                            etcd export their spans there, for requests whose W3C
#                            traceparent is sampled (they start no traces of their own)
#   TIDAL_JAEGER=1           also start Jaeger (jaeger.yaml; needs jaeger in the binary
#                            directory) and trace to it; its addresses go to
#                            DIR/jaeger.env (JAEGER_OTLP_HTTP, JAEGER_OTLP_GRPC, JAEGER_QUERY)
#   TIDAL_TRACE_CONTROL_PLANE=0  with TIDAL_JAEGER=1: Jaeger, but kube-apiserver and etcd
#                            do not trace (what the controller's own tracing costs)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
log() { echo "up: $*" >&2; }
die() { log "error: $*"; exit 1; }
fail() { log "$*"; return 1; }

node=false
if [ "${1:-}" = --node ]; then
  node=true
  shift
fi
[ $# -eq 1 ] || die "usage: up.sh [--node] DIR"
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
if $node && [ ! -f "$dir/node.mode" ]; then
  [ -f "$dir/ports.env" ] && die "$dir was first started without --node: use a fresh DIR"
  [ "$(id -u)" -eq 0 ] || die "--node needs root (kubelet, containerd, iptables)"
  touch "$dir/node.mode"
fi
timeout="${TIDAL_READY_TIMEOUT:-90}"
tracing="${TIDAL_TRACING_ENDPOINT:-}"
for tool in openssl curl base64; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required"
done

bin="${TIDAL_CONTROL_PLANE_BIN:-}"
if [ -z "$bin" ]; then
  bin="$("$here/provision.sh" | tail -n 1)" || die "provisioning failed"
fi
for tool in etcd kube-apiserver; do
  [ -x "$bin/$tool" ] || die "$bin/$tool not found (run provision.sh)"
done

# --- state shared with down.sh --------------------------------------------------

# shellcheck source=tests/control-plane/common.sh
. "$here/common.sh"
# shellcheck source=tests/control-plane/node.sh
. "$here/node.sh"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port nobody listens on, below Linux's ephemeral range so that outgoing
# connections do not take it meanwhile.
pick_port() {
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 12000))
    port_free "$port" && { echo "$port"; return; }
  done
  die "no free loopback port found"
}

# --- certificates (once per DIR) ------------------------------------------------

make_certificates() {
  local pki="$dir/pki"
  [ -f "$pki/admin.crt" ] && return
  log "creating certificates in $pki"
  rm -rf "$pki" && mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=tidal-test-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
      -keyout server.key -out server.csr 2>/dev/null
    # Also the names and the ClusterIP pods reach it by, and the machine's address.
    local names="IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default"
    names="$names,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    [ -z "$(node_ip)" ] || names="$names,IP:$(node_ip)"
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$names" >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=admin" \
      -keyout admin.key -out admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile admin.ext -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "openssl failed"
}

# --- ports (once per DIR, reused by restarts) -----------------------------------

choose_ports() {
  if [ -f "$dir/ports.env" ]; then
    # shellcheck source=/dev/null
    . "$dir/ports.env"
    return
  fi
  etcd_client_port="$(pick_port)"
  etcd_peer_port="$(pick_port)"
  apiserver_port="$(pick_port)"
  printf 'etcd_client_port=%s\netcd_peer_port=%s\napiserver_port=%s\n' \
    "$etcd_client_port" "$etcd_peer_port" "$apiserver_port" >"$dir/ports.env"
  if [ "${TIDAL_JAEGER:-}" = 1 ]; then
    local name
    for name in jaeger_otlp_http_port jaeger_otlp_grpc_port jaeger_query_port \
      jaeger_query_grpc_port; do
      printf -v "$name" '%s' "$(pick_port)"
      echo "$name=${!name}" >>"$dir/ports.env"
    done
  fi
  if is_node; then
    for name in kubelet_port kubelet_healthz_port kube_proxy_healthz_port \
      kube_proxy_metrics_port kcm_port scheduler_port; do
      printf -v "$name" '%s' "$(pick_port)"
      echo "$name=${!name}" >>"$dir/ports.env"
    done
  fi
}

# --- components ------------------------------------------------------------------

# Starts NAME detached from the caller's session; its output goes to DIR/NAME.log.
start() { # name command...
  local name="$1"
  shift
  setsid "$@" >>"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

# Waits until CHECK succeeds; fails (returns 1) with the component's last log
# lines if it exits or the timeout passes.
await() { # name check...
  local name="$1" deadline=$((SECONDS + timeout))
  shift
  until "$@"; do
    if ! running_pid "$name" >/dev/null; then
      tail -n 20 "$dir/$name.log" >&2 || true
      fail "$name exited during start-up (log: $dir/$name.log)"
      return
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$dir/$name.log" >&2 || true
      fail "$name not ready after ${timeout}s (log: $dir/$name.log)"
      return
    fi
    sleep 0.2
  done
}

# Whether process PID listens on loopback PORT itself (/proc/net/tcp's LISTEN sockets
# matched to the process's file descriptors): an answer on the port could come from
# another process that took it first, e.g. the Jaeger of a concurrent up.sh.
owns_port() { # pid port
  local inode hex
  hex="$(printf '%04X' "$2")"
  for inode in $(awk -v port=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == port { print $10 }' \
    /proc/net/tcp); do
    find "/proc/$1/fd" -lname "socket:\[$inode\]" 2>/dev/null | grep -q . && return 0
  done
  return 1
}

jaeger_ready() {
  local pid port
  pid="$(running_pid jaeger)" || return 1
  for port in "$jaeger_query_port" "$jaeger_otlp_http_port" "$jaeger_otlp_grpc_port"; do
    owns_port "$pid" "$port" || return 1
  done
  curl -fsS --max-time 2 "http://127.0.0.1:$jaeger_query_port/api/services" >/dev/null 2>&1
}

# Jaeger, when asked for: started before etcd and kube-apiserver, which trace to it.
start_jaeger() {
  [ "${TIDAL_JAEGER:-}" = 1 ] || return 0
  [ -x "$bin/jaeger" ] || { fail "TIDAL_JAEGER=1 but $bin/jaeger is missing"; return; }
  [ -n "${jaeger_query_port:-}" ] ||
    { fail "TIDAL_JAEGER=1 on $dir, first started without Jaeger: use a fresh DIR"; return; }
  local grpc="127.0.0.1:$jaeger_otlp_grpc_port"
  [ "${TIDAL_TRACE_CONTROL_PLANE:-1}" = 0 ] || tracing="$grpc"
  printf 'JAEGER_OTLP_HTTP=http://127.0.0.1:%s\nJAEGER_OTLP_GRPC=%s\nJAEGER_QUERY=127.0.0.1:%s\n' \
    "$jaeger_otlp_http_port" "$grpc" "$jaeger_query_port" >"$dir/jaeger.env"
  if running_pid jaeger >/dev/null; then
    await jaeger jaeger_ready
    return
  fi
  local port
  for port in "$jaeger_otlp_http_port" "$jaeger_otlp_grpc_port" "$jaeger_query_port" \
    "$jaeger_query_grpc_port"; do
    port_free "$port" || { fail "Jaeger's port $port is taken by another process"; return; }
  done
  log "starting Jaeger (query API on http://127.0.0.1:$jaeger_query_port)"
  # In DIR, so that its command line names DIR (see running_pid).
  cp "$here/jaeger.yaml" "$dir/jaeger.yaml"
  # OTEL_*: Jaeger traces itself to localhost:4317 otherwise (and hangs on exit).
  OTEL_SDK_DISABLED=true OTEL_TRACES_SAMPLER=always_off \
    JAEGER_OTLP_HTTP_PORT="$jaeger_otlp_http_port" JAEGER_OTLP_GRPC_PORT="$jaeger_otlp_grpc_port" \
    JAEGER_QUERY_PORT="$jaeger_query_port" JAEGER_QUERY_GRPC_PORT="$jaeger_query_grpc_port" \
    start jaeger "$bin/jaeger" --config="file:$dir/jaeger.yaml"
  await jaeger jaeger_ready
}

etcd_healthy() {
  curl -fsS --max-time 2 "http://127.0.0.1:$etcd_client_port/health" 2>/dev/null |
    grep -q '"health":"true"'
}

apiserver_ready() {
  curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
    --key "$dir/pki/admin.key" "https://127.0.0.1:$apiserver_port/readyz" >/dev/null 2>&1
}

start_etcd() {
  if running_pid etcd >/dev/null; then
    await etcd etcd_healthy
    return
  fi
  if ! port_free "$etcd_client_port" || ! port_free "$etcd_peer_port"; then
    fail "etcd's port $etcd_client_port or $etcd_peer_port is taken by another process"
    return
  fi
  log "starting etcd on 127.0.0.1:$etcd_client_port"
  local etcd_tracing=()
  if [ -n "$tracing" ]; then
    # Sampling rate 0 per million: only requests of a sampled trace are traced.
    etcd_tracing=(--enable-distributed-tracing --distributed-tracing-address="$tracing"
      --distributed-tracing-service-name=etcd --distributed-tracing-sampling-rate=0)
  fi
  start etcd "$bin/etcd" \
    --name=tidal-test \
    --data-dir="$dir/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$etcd_client_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_client_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="tidal-test=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync \
    --log-level=warn \
    "${etcd_tracing[@]}"
  await etcd etcd_healthy
}

start_apiserver() {
  if running_pid kube-apiserver >/dev/null; then
    await kube-apiserver apiserver_ready
    return
  fi
  if ! port_free "$apiserver_port"; then
    fail "the apiserver's port $apiserver_port is taken by another process"
    return
  fi
  log "starting kube-apiserver on https://127.0.0.1:$apiserver_port"
  local pki="$dir/pki"
  # Every request, with its user agent and response code, goes to DIR/audit.log: tests
  # attribute writes to controller replicas with it, benches count a client's requests.
  cat >"$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
POLICY
  local apiserver_tracing=()
  if [ -n "$tracing" ]; then
    # As for etcd: a request is traced only when its traceparent is sampled.
    cat >"$dir/tracing.yaml" <<TRACING
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: $tracing
samplingRatePerMillion: 0
TRACING
    apiserver_tracing=(--tracing-config-file="$dir/tracing.yaml")
  fi
  local mode=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1
    --endpoint-reconciler-type=none --authorization-mode=RBAC
    --disable-admission-plugins=ServiceAccount)
  if is_node; then
    # shellcheck disable=SC2054 # Node,RBAC is one flag's value
    # Pods reach it at the `kubernetes` Service (kube-proxy: ClusterIP to this address).
    mode=(--bind-address=0.0.0.0 --advertise-address="$(node_ip)"
      --endpoint-reconciler-type=lease --authorization-mode=Node,RBAC
      --enable-admission-plugins=NodeRestriction
      --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
      --kubelet-client-key="$pki/apiserver-kubelet-client.key"
      --requestheader-client-ca-file="$pki/front-proxy-ca.crt"
      --requestheader-allowed-names=front-proxy-client
      --requestheader-username-headers=X-Remote-User
      --requestheader-group-headers=X-Remote-Group
      --requestheader-extra-headers-prefix=X-Remote-Extra-
      --proxy-client-cert-file="$pki/front-proxy-client.crt"
      --proxy-client-key-file="$pki/front-proxy-client.key"
      --enable-aggregator-routing=true)
  fi
  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_client_port" \
    --secure-port="$apiserver_port" \
    --tls-cert-file="$pki/server.crt" \
    --tls-private-key-file="$pki/server.key" \
    --client-ca-file="$pki/ca.crt" \
    --service-account-issuer=https://localhost \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-account-key-file="$pki/sa.pub" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --cert-dir="$dir/apiserver-certs" \
    --audit-policy-file="$dir/audit-policy.yaml" \
    --audit-log-path="$dir/audit.log" \
    --audit-log-format=json \
    --audit-log-maxsize=200 \
    --audit-log-maxbackup=1 \
    "${mode[@]}" "${apiserver_tracing[@]}"
  await kube-apiserver apiserver_ready
}

write_kubeconfig() {
  local pki="$dir/pki"
  cat >"$dir/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tidal-test
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")
contexts:
- name: tidal-test
  context:
    cluster: tidal-test
    user: admin
current-context: tidal-test
EOF
  mv "$dir/kubeconfig.tmp" "$dir/kubeconfig"
}

if is_node; then
  claim_machine || exit 1
fi
make_certificates
! is_node || make_node_certificates
# Ports are checked free just before use, but another process (another control
# plane starting at the same time, say) may take one first: a first start then
# retries on other ports. A restart keeps its ports, so it fails instead.
fresh=true
[ -f "$dir/ports.env" ] && fresh=false
for attempt in 1 2 3 4 5; do
  choose_ports
  if start_jaeger && start_etcd && start_apiserver && write_kubeconfig && start_node; then
    break
  fi
  if ! $fresh || [ "$attempt" -eq 5 ]; then
    die "start-up failed"
  fi
  log "start-up failed (attempt $attempt); retrying on other ports"
  "$here/down.sh" "$dir"
  rm -rf "$dir/ports.env" "$dir/etcd-data"
done
log "ready: kubectl --kubeconfig $dir/kubeconfig get --raw /readyz"
echo "$dir/kubeconfig"
