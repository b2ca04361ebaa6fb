# shellcheck shell=bash
# The node of `up.sh --node DIR`: containerd (Debian's, runc, bridge CNI), kubelet,
# kube-proxy, kube-controller-manager and kube-scheduler beside the control plane, and
# the teardown `down.sh` runs. One node per machine: kubelet and kube-proxy own
# machine-wide state (cgroups named kubepods, iptables chains, /var/lib/kubelet).
#
# Sourced by up.sh and down.sh; expects $dir, $bin, and the helpers of common.sh
# (and of up.sh for the start functions).
# shellcheck disable=SC2154

# The image of pod sandboxes, and of workload pods (pull policy Never).
pause_image="registry.k8s.io/pause:3.10"
node_name="localhost"
pod_subnet="10.88.0.0/16"
bridge="tidal0"
containerd_socket() { echo "$dir/containerd/containerd.sock"; }

# The sysctls kubelet, kube-proxy and the bridge plugin set; down.sh restores them.
node_sysctls=(vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward
  net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables net.netfilter.nf_conntrack_max)
# Machine-wide paths kubelet and containerd create whatever their flags say.
node_paths=(/var/lib/kubelet /var/log/containers /var/log/pods /run/netns /run/containerd
  /var/lib/cni /etc/cni /opt/cni /opt/containerd)

is_node() { [ -f "$dir/node.mode" ]; }

# The machine's node: the DIR of the one running, and on a second line its owner's
# identity (up.sh --node writes it, down.sh removes it last). TIDAL_NODE_MARKER moves it
# (the harness's own tests).
node_marker="${TIDAL_NODE_MARKER:-/run/tidal-scheduler-node}"
# How long up.sh --node waits for another node whose owner still runs (seconds).
node_wait="${TIDAL_NODE_WAIT:-1800}"

# "PID START" of a live process (START: its start time in clock ticks, so that a
# recycled pid never passes for it).
process_identity() { # pid
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  # shellcheck disable=SC2086 # the fields after "PID (COMM) ": STATE ... START (22nd)
  set -- ${stat##*) }
  [ "$1" != Z ] || return 1
  echo "${stat%% *} ${20}"
}

# Whether the owner a marker names still runs (an unknown owner counts as running).
owner_runs() { # "PID START"
  [ -z "$1" ] || [ "$(process_identity "${1%% *}")" = "$1" ]
}

# Whether a down.sh of DIR runs (a reaper tearing a node down after its owner ended).
teardown_runs() { # dir
  pgrep -f -- "down.sh $1\$" >/dev/null
}

# Claims the machine for DIR on behalf of its owner (TIDAL_NODE_OWNER, or up.sh's
# caller: the test process). The node lives as long as its owner: another DIR's node
# is waited for while its owner runs (at most TIDAL_NODE_WAIT seconds) or a down.sh
# tears it down; one that outlived its owner (whose reaper was killed too) is stopped
# here with down.sh. Idempotent.
claim_machine() {
  local lock marker other owner stopped="" since="" noted=$SECONDS
  local deadline=$((SECONDS + node_wait)) owner_pid="${TIDAL_NODE_OWNER:-$PPID}" identity
  identity="$(process_identity "$owner_pid")" ||
    { fail "the node's owner (pid $owner_pid) does not run"; return; }
  exec {lock}>>"$node_marker.lock"
  while :; do
    flock "$lock"
    marker="$(cat "$node_marker" 2>/dev/null || true)"
    other="${marker%%$'\n'*}"
    owner=""
    [ "$marker" = "$other" ] || owner="${marker#*$'\n'}"
    if [ -n "$other" ] && [ "$other" != "$dir" ] && [ -d "$other" ] && [ "$other" != "$stopped" ]; then
      flock -u "$lock"
    else
      # Claimed already (a restart of a component, a retry on other ports): the owner
      # stays the one that started the node.
      [ "$other" = "$dir" ] || {
        [ -z "$other" ] || [ "$other" = "$stopped" ] ||
          log "the node of $other is gone (its directory too); taking over"
        printf '%s\n%s\n' "$dir" "$identity" >"$node_marker"
      }
      exec {lock}>&-
      return 0
    fi
    if owner_runs "$owner" || teardown_runs "$other"; then
      since=""
      if [ $SECONDS -ge $deadline ]; then
        exec {lock}>&-
        fail "another node runs on this machine ($other, owner pid ${owner%% *}) for more than ${node_wait}s (TIDAL_NODE_WAIT); stop it with down.sh $other"
        return
      fi
      if [ $SECONDS -ge $noted ]; then
        log "waiting for the node of $other (its owner, pid ${owner%% *}, runs)"
        noted=$((SECONDS + 60))
      fi
    elif [ $((SECONDS - ${since:=$SECONDS})) -ge 10 ]; then
      # Its owner ended 10 s ago and no reaper tears it down.
      log "the node of $other outlived its owner (pid ${owner%% *}); stopping it"
      "$here/down.sh" "$other" || log "down.sh $other failed; taking over all the same"
      stopped="$other"
    fi
    sleep 0.5
  done
}

# The VM's primary address (kubelet refuses a loopback node IP).
node_ip() {
  ip -4 -o addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }'
}

# What exists before the first start, so that teardown removes only what the node
# added (machine-wide paths, sysctls, network namespaces, nft tables).
record_machine_state() {
  [ -f "$dir/machine-before/recorded" ] && return
  mkdir -p "$dir/machine-before"
  local path name
  for path in "${node_paths[@]}"; do
    [ -e "$path" ] && echo "$path"
  done >"$dir/machine-before/paths"
  for name in "${node_sysctls[@]}"; do
    sysctl -n "$name" >/dev/null 2>&1 && echo "$name=$(sysctl -n "$name")"
  done >"$dir/machine-before/sysctls"
  ls /run/netns 2>/dev/null >"$dir/machine-before/netns" || true
  nft list tables 2>/dev/null >"$dir/machine-before/nft-tables" || true
  touch "$dir/machine-before/recorded"
}

# --- certificates ------------------------------------------------------------------

make_node_certificates() {
  local pki="$dir/pki"
  [ -f "$pki/kubelet.crt" ] && return
  (
    cd "$pki"
    # The kubelet's client identity (Node authorizer, NodeRestriction).
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$node_name" \
      -keyout kubelet.key -out kubelet.csr 2>/dev/null
    openssl x509 -req -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile admin.ext -out kubelet.crt 2>/dev/null
    # The API server's identity towards kubelets (logs, exec, port-forward).
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      -keyout apiserver-kubelet-client.key -out apiserver-kubelet-client.csr 2>/dev/null
    openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 3650 -extfile admin.ext -out apiserver-kubelet-client.crt 2>/dev/null
    # The aggregation layer (APIServices such as KEDA's external metrics): the API server
    # proxies as front-proxy-client, with a CA of its own that extension servers trust for
    # the X-Remote-* headers.
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=tidal-test-front-proxy-ca" \
      -keyout front-proxy-ca.key -out front-proxy-ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=front-proxy-client" \
      -keyout front-proxy-client.key -out front-proxy-client.csr 2>/dev/null
    openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
      -CAcreateserial -days 3650 -extfile admin.ext -out front-proxy-client.crt 2>/dev/null
  ) || die "openssl failed (node certificates)"
}

# A kubeconfig for NAME with a client certificate from pki/NAME.{crt,key}.
write_component_kubeconfig() { # name
  local pki="$dir/pki"
  cat >"$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tidal-test
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: $1
  user:
    client-certificate: $pki/$1.crt
    client-key: $pki/$1.key
contexts:
- name: tidal-test
  context: {cluster: tidal-test, user: $1}
current-context: tidal-test
EOF
}

# --- containerd and the pause image ------------------------------------------------

containerd_ready() {
  ctr --address "$(containerd_socket)" version >/dev/null 2>&1
}

start_containerd() {
  command -v containerd >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 &&
    [ -x /usr/lib/cni/bridge ] ||
    { fail "containerd, runc and the CNI plugins are required: run tests/control-plane/packages.sh node (as root)"; return; }
  if running_pid containerd >/dev/null; then
    await containerd containerd_ready
    return
  fi
  mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam"
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$(containerd_socket)"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # Negative oom_score_adj is refused here (no CAP_SYS_RESOURCE): without this every
  # sandbox fails in runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
EOF
  cat >"$dir/cni/net.d/10-tidal.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "tidal",
  "plugins": [
    {
      "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_subnet"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  log "starting containerd ($(containerd_socket))"
  start containerd containerd --config "$dir/containerd/config.toml"
  await containerd containerd_ready
}

# Imports the pause image (packed from the provisioned static pause binary) once.
import_pause_image() {
  local ctr=(ctr --address "$(containerd_socket)" -n k8s.io)
  "${ctr[@]}" images ls -q | grep -qxF "$pause_image" && return
  [ -x "$bin/pause" ] || { fail "$bin/pause is missing (run provision.sh)"; return; }
  local rootfs="$dir/pause-rootfs"
  rm -rf "$rootfs" && mkdir -p "$rootfs"
  cp "$bin/pause" "$rootfs/pause"
  bash "$here/../../deploy/image/oci-archive.sh" "$rootfs" "$pause_image" 65535:65535 \
    "$dir/pause.tar" /pause || { fail "packing the pause image failed"; return; }
  "${ctr[@]}" images import "$dir/pause.tar" >/dev/null || { fail "importing the pause image failed"; return; }
  rm -rf "$rootfs" "$dir/pause.tar"
}

# --- kubelet and kube-proxy ----------------------------------------------------------

kubelet_healthy() {
  curl -fsS --max-time 2 "http://127.0.0.1:$kubelet_healthz_port/healthz" >/dev/null 2>&1
}

start_kubelet() {
  if running_pid kubelet >/dev/null; then
    await kubelet kubelet_healthy
    return
  fi
  write_component_kubeconfig kubelet
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://$(containerd_socket)
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
protectKernelDefaults: false
failSwapOn: false
resolvConf: /etc/resolv.conf
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# The images are imported, never pulled: garbage-collecting them would lose them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 40
oomScoreAdj: 0
serializeImagePulls: false
EOF
  log "starting kubelet (node $node_name, $(node_ip))"
  start kubelet "$bin/kubelet" --config="$dir/kubelet.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
    --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet-pki" --hostname-override="$node_name" \
    --node-ip="$(node_ip)" --v=1
  await kubelet kubelet_healthy
}

kube_proxy_healthy() {
  curl -fsS --max-time 2 "http://127.0.0.1:$kube_proxy_healthz_port/healthz" >/dev/null 2>&1
}

start_kube_proxy() {
  if running_pid kube-proxy >/dev/null; then
    await kube-proxy kube_proxy_healthy
    return
  fi
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/kubeconfig}
mode: iptables
hostnameOverride: $node_name
clusterCIDR: $pod_subnet
healthzBindAddress: 127.0.0.1:$kube_proxy_healthz_port
metricsBindAddress: 127.0.0.1:$kube_proxy_metrics_port
# NodePorts on the node's address only (on loopback they need route_localnet).
nodePortAddresses: [primary]
# Leave the machine's conntrack settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  log "starting kube-proxy (iptables mode)"
  start kube-proxy "$bin/kube-proxy" --config="$dir/kube-proxy.yaml" --v=1
  await kube-proxy kube_proxy_healthy
}

# --- controllers -----------------------------------------------------------------------

kcm_healthy() {
  curl -fsSk --max-time 2 "https://127.0.0.1:$kcm_port/healthz" >/dev/null 2>&1
}

scheduler_healthy() {
  curl -fsSk --max-time 2 "https://127.0.0.1:$scheduler_port/healthz" >/dev/null 2>&1
}

start_controllers() {
  if running_pid kube-controller-manager >/dev/null; then
    await kube-controller-manager kcm_healthy || return
  else
    log "starting kube-controller-manager"
    start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
      --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
      --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt" \
      --use-service-account-credentials=false --leader-elect=false \
      --bind-address=127.0.0.1 --secure-port="$kcm_port" --cert-dir="$dir/kcm-certs" \
      --cluster-cidr="$pod_subnet" --service-cluster-ip-range=10.0.0.0/24 \
      --horizontal-pod-autoscaler-sync-period="${TIDAL_HPA_SYNC_PERIOD:-2s}" --v=1
    await kube-controller-manager kcm_healthy || return
  fi
  if running_pid kube-scheduler >/dev/null; then
    await kube-scheduler scheduler_healthy
    return
  fi
  log "starting kube-scheduler"
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/kubeconfig" \
    --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$scheduler_port" \
    --cert-dir="$dir/scheduler-certs" --v=1
  await kube-scheduler scheduler_healthy
}

node_ready() {
  [ "$("$bin/kubectl" --kubeconfig "$dir/kubeconfig" get node "$node_name" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# The default ServiceAccount exists once kube-controller-manager's token controllers
# run: pods of a namespace are admitted from then on.
service_accounts_ready() {
  "$bin/kubectl" --kubeconfig "$dir/kubeconfig" -n default get serviceaccount default \
    >/dev/null 2>&1
}

start_node() {
  is_node || return 0
  for tool in kubelet kube-proxy kube-controller-manager kube-scheduler kubectl pause; do
    [ -x "$bin/$tool" ] || { fail "$bin/$tool not found (run provision.sh)"; return; }
  done
  claim_machine || return
  # The binaries, for down.sh (kubectl deletes the pods).
  echo "$bin" >"$dir/node.mode"
  record_machine_state
  start_containerd && import_pause_image && start_kubelet && start_kube_proxy &&
    start_controllers || return
  await kubelet node_ready || return
  await kube-controller-manager service_accounts_ready || return
  printf 'CONTAINERD_ADDRESS=%s\nPAUSE_IMAGE=%s\nNODE_NAME=%s\nNODE_IP=%s\n' \
    "$(containerd_socket)" "$pause_image" "$node_name" "$(node_ip)" >"$dir/node.env"
}

# --- teardown (down.sh) ------------------------------------------------------------------

ctr_k8s() { ctr --address "$(containerd_socket)" -n k8s.io "$@"; }

# Deletes every pod while kubelet still runs (so that CNI teardown happens), with the
# controllers stopped first (so that nothing recreates them).
delete_pods() {
  running_pid kube-apiserver >/dev/null && running_pid kubelet >/dev/null && [ -x "$bin/kubectl" ] ||
    return 0
  local kubectl=("$bin/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout=10s)
  "${kubectl[@]}" delete pods --all --all-namespaces --grace-period=1 --wait=false \
    >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 60))
  while [ -n "$("${kubectl[@]}" get pods --all-namespaces -o name 2>/dev/null)" ]; do
    if [ $SECONDS -ge $deadline ]; then
      log "pods still there after 60 s; removing them by force"
      "${kubectl[@]}" delete pods --all --all-namespaces --force --grace-period=0 \
        >/dev/null 2>&1 || true
      break
    fi
    sleep 0.5
  done
}

# What kubelet left in containerd: tasks killed, containers and sandboxes removed.
remove_containers() {
  containerd_ready || return 0
  local id
  for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks rm -f "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_k8s containers ls -q 2>/dev/null); do
    ctr_k8s containers rm "$id" >/dev/null 2>&1 || true
  done
}

# Container shims of this containerd (they outlive containerd by design).
kill_shims() {
  local pid
  for pid in $(pgrep -f "containerd-shim.*$(containerd_socket)" 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null || true
  done
}

unmount_node() {
  # Deepest first: pod volumes, the kubelet's bind mount of its root onto itself, rootfs
  # mounts of containerd, sandbox shm.
  awk -v d="$dir/" 'index($5, d) == 1 || $5 ~ "^/run/containerd/|^/run/netns/" { print $5 }' \
    /proc/self/mountinfo | sort -r | while read -r mount; do
    umount -l "$mount" 2>/dev/null || true
  done
}

remove_network() {
  local netns link
  for netns in /run/netns/*; do
    [ -e "$netns" ] || continue
    grep -qxF "${netns##*/}" "$dir/machine-before/netns" 2>/dev/null ||
      ip netns delete "${netns##*/}" 2>/dev/null || true
  done
  # The pods' veths (CNI removes them with their sandbox; these outlived it), then the
  # bridge they hang on.
  for link in "/sys/class/net/$bridge/brif/"*; do
    [ -e "$link" ] || continue
    ip link del "${link##*/}" 2>/dev/null || true
  done
  if ip link show "$bridge" >/dev/null 2>&1; then
    ip link del "$bridge"
  fi
  return 0
}

# Every KUBE-* and CNI-* chain of kubelet, kube-proxy and the CNI plugins, IPv4 and
# IPv6, with the rules jumping to them; then the nft tables the node created.
remove_packet_filtering() {
  local cmd table rule chain
  for cmd in iptables ip6tables; do
    command -v "$cmd-save" >/dev/null 2>&1 || continue
    for table in filter nat mangle raw; do
      "$cmd-save" -t "$table" >/dev/null 2>&1 || continue
      "$cmd-save" -t "$table" | awk '/^-A / && $2 !~ /^(KUBE|CNI)-/ && / -j (KUBE|CNI)-/ { sub(/^-A/, "-D"); print }' |
        while IFS= read -r rule; do eval "$cmd -w -t $table $rule" || true; done
      for chain in $("$cmd-save" -t "$table" | awk '/^:(KUBE|CNI)-/ { print substr($1, 2) }'); do
        "$cmd" -w -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$cmd-save" -t "$table" | awk '/^:(KUBE|CNI)-/ { print substr($1, 2) }'); do
        "$cmd" -w -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  command -v nft >/dev/null 2>&1 || return 0
  local family name
  nft list tables 2>/dev/null | while read -r _ family name; do
    grep -qxF "table $family $name" "$dir/machine-before/nft-tables" 2>/dev/null ||
      nft delete table "$family" "$name" 2>/dev/null || true
  done
}

restore_machine_state() {
  local entry path
  while IFS= read -r entry; do
    sysctl -qw "$entry" >/dev/null 2>&1 || true
  done <"$dir/machine-before/sysctls"
  for path in "${node_paths[@]}"; do
    grep -qxF "$path" "$dir/machine-before/paths" || rm -rf "$path" 2>/dev/null || true
  done
}

# The kubepods cgroups of every v1 hierarchy (and of the unified one), deepest first,
# after killing whatever still runs in them (containers whose shim died).
remove_cgroups() {
  local hierarchy cgroup deadline
  for hierarchy in /sys/fs/cgroup/*; do
    [ -d "$hierarchy/kubepods" ] || continue
    find "$hierarchy/kubepods" -name cgroup.procs -exec cat {} + 2>/dev/null |
      while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for hierarchy in /sys/fs/cgroup/*; do
    [ -d "$hierarchy/kubepods" ] || continue
    deadline=$((SECONDS + 10))
    while read -r cgroup; do
      until rmdir "$cgroup" 2>/dev/null || [ ! -d "$cgroup" ]; do
        # A killed process leaves its cgroup once it is reaped.
        [ $SECONDS -lt $deadline ] || { log "cannot remove $cgroup"; break; }
        sleep 0.1
      done
    done < <(find "$hierarchy/kubepods" -depth -type d 2>/dev/null)
  done
}

# Stops the node's components (down.sh calls the apiserver's and etcd's stop after).
stop_node() {
  is_node || return 0
  stop kube-controller-manager
  stop kube-scheduler
  delete_pods
  stop kube-proxy
  stop kubelet
  remove_containers
  stop containerd
  kill_shims
  release_machine
  rm -f "$dir/node.env"
}

# Undoes what the node changed on the machine and frees it — unless the machine
# belongs to another node by now (down.sh run again after another up.sh --node claimed
# it). Holds the marker's lock meanwhile, so that no node claims the machine half undone.
release_machine() {
  local lock holder
  exec {lock}>>"$node_marker.lock"
  flock "$lock"
  holder="$(head -n 1 "$node_marker" 2>/dev/null || true)"
  if [ -n "$holder" ] && [ "$holder" != "$dir" ]; then
    log "the machine belongs to the node of $holder: leaving it as it is"
  else
    unmount_node
    remove_network
    remove_packet_filtering
    remove_cgroups
    [ ! -f "$dir/machine-before/recorded" ] || restore_machine_state
    rm -f "$node_marker"
  fi
  exec {lock}>&-
}
