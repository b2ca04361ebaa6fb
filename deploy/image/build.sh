#!/usr/bin/env bash
# Builds the controller's image without a container engine: the release binary,
# statically linked (glibc, `+crt-static` on the gnu target), in a minimal root file
# system (no shell, no package manager; the user 65532 "nonroot" as in distroless), packed
# as an OCI archive by oci-archive.sh. Prints the archive's path as the last line of
# stdout; the image is tidal-scheduler:TAG (default: the version in Cargo.toml).
#
#   deploy/image/build.sh [TAG]
#
# Load it with `ctr -n k8s.io images import`, `podman load -i`, or
# `skopeo copy oci-archive:PATH docker://REGISTRY/tidal-scheduler:TAG`. With Docker,
# Podman or Buildah, deploy/image/Containerfile builds the same image from source.
#
# Environment: CARGO_TARGET_DIR as usual; TIDAL_IMAGE_DIR where the archive goes
# (default target/image).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
log() { echo "image: $*" >&2; }
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)"
tag="${1:-$version}"
[ -n "$tag" ] || { log "error: no version in Cargo.toml"; exit 1; }
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
out_dir="${TIDAL_IMAGE_DIR:-$target_dir/image}"
triple=x86_64-unknown-linux-gnu

log "building the static release binary ($triple, +crt-static)"
# With --target, build scripts and proc macros stay dynamic; only the binary is static
# (and stripped: a third of the size).
(cd "$repo" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" CARGO_PROFILE_RELEASE_STRIP=symbols \
  cargo build --release --locked --target "$triple" --bin tidal-scheduler >&2)
binary="$target_dir/$triple/release/tidal-scheduler"
if readelf -l "$binary" | grep -q 'program interpreter'; then
  log "error: $binary is dynamically linked"
  exit 1
fi

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$binary" "$rootfs/usr/local/bin/tidal-scheduler"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
# Name resolution from /etc/hosts, then DNS (an OTLP endpoint given by name).
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
# The system's roots, as distroless has them: an https OTLP endpoint is checked against
# them (and OTEL_EXPORTER_OTLP_CERTIFICATE's).
bundle=/etc/ssl/certs/ca-certificates.crt
if [ -f "$bundle" ]; then
  install -D -m 0644 "$bundle" "$rootfs$bundle"
else
  log "warning: no $bundle (Debian's ca-certificates): the image trusts no public CA"
fi

archive="$out_dir/tidal-scheduler-$tag.oci.tar"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)}" \
  bash "$repo/deploy/image/oci-archive.sh" "$rootfs" "docker.io/library/tidal-scheduler:$tag" \
  65532:65532 "$archive" /usr/local/bin/tidal-scheduler
log "tidal-scheduler:$tag: $archive ($(($(stat -c %s "$archive") / 1024)) KiB)"
echo "$archive"
