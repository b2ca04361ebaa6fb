#!/usr/bin/env bash
# Packs a root file system directory into a one-layer OCI image archive (an OCI image
# layout in a tar file, as `podman save --format oci-archive`, `skopeo copy oci-archive:`
# and `ctr images import` read it), without a container engine. Reproducible: the same
# directory gives the same digests (sorted entries, owner root, mtime of SOURCE_DATE_EPOCH
# or 0).
#
# Usage: oci-archive.sh ROOTFS IMAGE USER OUT.tar ENTRYPOINT...
#   ROOTFS      directory that becomes the image's file system
#   IMAGE       full reference, e.g. docker.io/library/tidal-scheduler:0.1.0
#   USER        uid:gid the container runs as
#   OUT.tar     the archive to write
#   ENTRYPOINT  the command (absolute path first)
set -euo pipefail

[ $# -ge 5 ] || { echo "usage: oci-archive.sh ROOTFS IMAGE USER OUT.tar ENTRYPOINT..." >&2; exit 1; }
rootfs="$1" image="$2" user="$3" out="$4"
shift 4
[ -d "$rootfs" ] || { echo "oci-archive: $rootfs is not a directory" >&2; exit 1; }
epoch="${SOURCE_DATE_EPOCH:-0}"

layout="$(mktemp -d)"
trap 'rm -rf "$layout"' EXIT
mkdir -p "$layout/blobs/sha256"

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
# A JSON string (the arguments here are paths and plain words: quotes and backslashes
# are escaped, nothing else needs it).
json_string() { local s="${1//\\/\\\\}"; printf '"%s"' "${s//\"/\\\"}"; }
# Moves FILE into the blobs by its digest; prints the digest.
add_blob() {
  local digest
  digest="$(sha "$1")"
  mv "$1" "$layout/blobs/sha256/$digest"
  echo "$digest"
}

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$rootfs" -cf "$layout/layer.tar" .
diff_id="$(sha "$layout/layer.tar")"
gzip -n -9 "$layout/layer.tar"
layer_size="$(size "$layout/layer.tar.gz")"
layer="$(add_blob "$layout/layer.tar.gz")"

entrypoint=""
for arg in "$@"; do entrypoint="$entrypoint${entrypoint:+,}$(json_string "$arg")"; done
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
printf '{"created":"%s","architecture":"amd64","os":"linux","config":{"User":%s,"Entrypoint":[%s],"Env":["PATH=/usr/local/bin:/usr/bin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"deploy/image/oci-archive.sh"}]}' \
  "$created" "$(json_string "$user")" "$entrypoint" "$diff_id" "$created" >"$layout/config.json"
config_size="$(size "$layout/config.json")"
config="$(add_blob "$layout/config.json")"

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" >"$layout/manifest.json"
manifest_size="$(size "$layout/manifest.json")"
manifest="$(add_blob "$layout/manifest.json")"

# Both names: containerd reads io.containerd.image.name, other tools the OCI ref.name.
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":%s,"org.opencontainers.image.ref.name":%s}}]}' \
  "$manifest" "$manifest_size" "$(json_string "$image")" "$(json_string "$image")" >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

mkdir -p "$(dirname "$out")"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$layout" -cf "$out.partial" oci-layout index.json blobs
mv "$out.partial" "$out"
