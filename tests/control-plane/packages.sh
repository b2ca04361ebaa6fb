#!/usr/bin/env bash
# Installs the Debian packages the tests need beyond the toolchains, if missing:
# libfaketime (the clock-skew tests run a replica with its wall clock moved) and the
# node's container runtime (up.sh --node): containerd, runc, the CNI plugins, iptables
# and conntrack (kubelet and kube-proxy program packet filtering with them).
# Idempotent: nothing to do when everything is there. Needs root (or sudo) and apt.
set -euo pipefail

log() { echo "packages: $*" >&2; }

missing=()
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(faketime)
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables-restore >/dev/null 2>&1 || missing+=(iptables)
command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
if [ ${#missing[@]} -eq 0 ]; then
  log "all present"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { log "error: ${missing[*]} missing and no apt-get"; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { log "error: installing ${missing[*]} needs root"; exit 1; }
  sudo="sudo"
fi
log "installing ${missing[*]}"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
log "installed ${missing[*]}"
