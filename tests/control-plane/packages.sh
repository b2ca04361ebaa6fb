#!/usr/bin/env bash
# Installs the Debian packages the tests need beyond the toolchains, if missing:
#
#   packages.sh            everything below
#   packages.sh faketime   libfaketime (the clock-skew tests run a replica with its wall
#                          clock moved)
#   packages.sh node       the node's container runtime (up.sh --node): containerd, runc,
#                          the CNI plugins, iptables and conntrack (kubelet and kube-proxy
#                          program packet filtering with them)
#
# The test harness calls it on first use (tidal_harness::packages), as it builds the Go
# binaries on first use; .ci/run calls it up front to show the time it takes.
# Idempotent: nothing to do when everything is there. Needs root (or sudo) and apt; where
# it has neither, its last line says what to install, and it exits 1.
set -euo pipefail

log() { echo "packages: $*" >&2; }

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(faketime node)

missing=()
for group in "${groups[@]}"; do
  case "$group" in
    faketime)
      [ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(faketime)
      ;;
    node)
      command -v containerd >/dev/null 2>&1 || missing+=(containerd)
      command -v runc >/dev/null 2>&1 || missing+=(runc)
      [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
      command -v iptables-restore >/dev/null 2>&1 || missing+=(iptables)
      command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
      ;;
    *)
      log "error: unknown group '$group' (faketime, node)"
      exit 2
      ;;
  esac
done
if [ ${#missing[@]} -eq 0 ]; then
  log "all present (${groups[*]})"
  exit 0
fi

remedy="install them as root: apt-get install ${missing[*]} (Debian's package names)"
command -v apt-get >/dev/null 2>&1 ||
  { log "error: ${missing[*]} missing and no apt-get here: $remedy"; exit 1; }
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
    log "error: ${missing[*]} missing and installing needs root: $remedy"
    exit 1
  fi
  sudo="sudo -n"
fi

# One installer at a time on this machine (apt takes its own lock and would fail).
lock="${TMPDIR:-/tmp}/tidal-scheduler-packages.lock"
exec 9>"$lock"
flock 9
log "installing ${missing[*]}"
if ! $sudo apt-get update -qq >&2 ||
  ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2; then
  log "error: apt-get could not install ${missing[*]}: $remedy"
  exit 1
fi
log "installed ${missing[*]}"
