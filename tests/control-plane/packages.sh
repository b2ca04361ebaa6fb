#!/usr/bin/env bash
# Installs the Debian packages the tests need beyond the toolchains, if missing:
# libfaketime (the clock-skew tests run a replica with its wall clock moved).
# Idempotent: nothing to do when everything is there. Needs root (or sudo) and apt.
set -euo pipefail

log() { echo "packages: $*" >&2; }

missing=()
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(faketime)
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
