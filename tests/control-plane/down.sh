#!/usr/bin/env bash
# Stops the control plane that up.sh started under DIR (the node first if it is one:
# node.sh's stop_node; then kube-apiserver, etcd, and Jaeger if it started one) and
# leaves no process behind: SIGTERM, then SIGKILL after a grace period. A node also
# leaves no pod, mount, cgroup, network namespace, veth, bridge, iptables chain or
# changed sysctl behind. The data stays, so `up.sh DIR` starts it again; remove DIR to
# forget it. With a
# COMPONENT (kube-apiserver or etcd), stops only that one (an outage drill);
# `up.sh DIR` starts it again on the same port.
#
# Usage: down.sh DIR [COMPONENT]
#
# Environment:
#   TIDAL_STOP_GRACE  seconds between SIGTERM and SIGKILL (default 10)
set -euo pipefail

log() { echo "down: $*" >&2; }
[ $# -eq 1 ] || [ $# -eq 2 ] || { log "usage: down.sh DIR [kube-apiserver|etcd]"; exit 1; }
only="${2:-}"
case "$only" in
  "" | kube-apiserver | etcd) ;;
  *) log "unknown component $only (kube-apiserver or etcd)"; exit 1 ;;
esac
[ -d "$1" ] || { log "$1: no such directory (nothing to stop)"; exit 0; }
dir="$(cd "$1" && pwd)"
grace="${TIDAL_STOP_GRACE:-10}"

# shellcheck source=tests/control-plane/common.sh
. "$(dirname "$0")/common.sh"
# shellcheck source=tests/control-plane/node.sh
. "$(dirname "$0")/node.sh"
bin="${TIDAL_CONTROL_PLANE_BIN:-}"
# The binaries a node was started with (kubectl), when the caller does not say.
[ -n "$bin" ] || [ ! -s "$dir/node.mode" ] || bin="$(cat "$dir/node.mode")"

# Alive and not a zombie (an orphan's zombie lingers until its new parent reaps it).
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

stop() { # name
  local pid deadline=$((SECONDS + grace))
  if pid="$(running_pid "$1")"; then
    kill -TERM "$pid" 2>/dev/null || true
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    if alive "$pid"; then
      log "$1 ($pid) ignored SIGTERM for ${grace}s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      while alive "$pid"; do sleep 0.1; done
    fi
    log "stopped $1 ($pid)"
  fi
  rm -f "$dir/$1.pid"
}

[ -n "$only" ] || stop_node
for component in kube-apiserver etcd jaeger; do
  [ -z "$only" ] || [ "$only" = "$component" ] || continue
  stop "$component"
done
