#!/usr/bin/env bash
# Cuts a release locally: builds the image archive (deploy/image/build.sh) and the packaged
# Helm chart (helm package) of this checkout, checks that every place carrying the version
# agrees — Cargo.toml, the chart's version and appVersion, deploy/controller.yaml's image
# tag, the image's name, the binary inside the image (`--version`), the image the chart
# renders — and that the chart's CRD is deploy/crd.yaml; writes SHA256SUMS and prints the
# directory of the artifacts as the last line of stdout. No registry is involved: push the
# archive and the chart from there.
#
#   release/cut.sh             a release: a clean tree, a version without a pre-release
#                              suffix, its CHANGELOG.md section dated; if release/releases
#                              records the version, it must name this commit
#   release/cut.sh --snapshot  the same artifacts and checks for any tree (the tests)
#
# Environment: CARGO_TARGET_DIR as usual; TIDAL_RELEASE_DIR where the artifacts go
# (default target/dist/VERSION); HELM a helm binary (default: helm on PATH, else the one
# tests/control-plane/provision.sh builds).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "release: $*" >&2; }
die() { log "error: $*"; exit 1; }

snapshot=false
case "${1:-}" in
  "") ;;
  --snapshot) snapshot=true ;;
  *) die "usage: release/cut.sh [--snapshot]" ;;
esac

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)"
[ -n "$version" ] || die "no version in Cargo.toml"
commit="$(git -C "$repo" rev-parse HEAD 2>/dev/null)" || die "$repo is not a git checkout"
dirty="$(git -C "$repo" status --porcelain)"

# A chart field (top-level `key: value` of Chart.yaml, quotes removed).
chart_field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *$/\1/p" "$repo/deploy/helm/tidal-scheduler/Chart.yaml"; }
[ "$(chart_field version)" = "$version" ] ||
  die "Chart.yaml version is '$(chart_field version)', Cargo.toml's $version"
[ "$(chart_field appVersion)" = "$version" ] ||
  die "Chart.yaml appVersion is '$(chart_field appVersion)', Cargo.toml's $version"
kustomize_image="$(sed -n 's/^ *image: *//p' "$repo/deploy/controller.yaml")"
[ "$kustomize_image" = "tidal-scheduler:$version" ] ||
  die "deploy/controller.yaml runs '$kustomize_image', not tidal-scheduler:$version"
cmp -s "$repo/deploy/crd.yaml" "$repo/deploy/helm/tidal-scheduler/crds/crds.yaml" ||
  die "the chart's crds/crds.yaml differs from deploy/crd.yaml"

if ! $snapshot; then
  [ -z "$dirty" ] || die "the tree has uncommitted changes (a release is a commit):
$dirty"
  case "$version" in *-*) die "$version is a pre-release version: set the release's version first" ;; esac
  grep -Eq "^## \[$version\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" "$repo/CHANGELOG.md" ||
    die "CHANGELOG.md has no dated section '## [$version] - YYYY-MM-DD'"
  recorded="$(awk -v v="$version" '$1 == v { print $2 }' "$repo/release/releases")"
  [ -z "$recorded" ] || [ "$recorded" = "$commit" ] ||
    die "release/releases records $version as cut from $recorded, not this commit $commit"
fi

helm="${HELM:-}"
if [ -z "$helm" ]; then
  if command -v helm >/dev/null 2>&1; then
    helm=helm
  else
    log "no helm on PATH: using the test control plane's (tests/control-plane/provision.sh)"
    helm="$(bash "$repo/tests/control-plane/provision.sh" | tail -n 1)/helm"
  fi
fi

target_dir="${CARGO_TARGET_DIR:-$repo/target}"
out="${TIDAL_RELEASE_DIR:-$target_dir/dist/$version}"
rm -rf "$out"
mkdir -p "$out"

log "building the image tidal-scheduler:$version"
archive="$(TIDAL_IMAGE_DIR="$out" bash "$repo/deploy/image/build.sh" "$version" | tail -n 1)"
[ -f "$archive" ] || die "deploy/image/build.sh printed no archive"

# The image's name, and the version of the binary inside it.
unpacked="$(mktemp -d)"
trap 'rm -rf "$unpacked"' EXIT
tar -xf "$archive" -C "$unpacked"
name="$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' "$unpacked/index.json")"
[ "$name" = "docker.io/library/tidal-scheduler:$version" ] || die "the archive's image is $name"
manifest="$(jq -r '.manifests[0].digest | sub("sha256:"; "")' "$unpacked/index.json")"
layer="$(jq -r '.layers[0].digest | sub("sha256:"; "")' "$unpacked/blobs/sha256/$manifest")"
mkdir "$unpacked/rootfs"
tar -xzf "$unpacked/blobs/sha256/$layer" -C "$unpacked/rootfs" ./usr/local/bin/tidal-scheduler
binary_version="$("$unpacked/rootfs/usr/local/bin/tidal-scheduler" --version)"
[ "$binary_version" = "tidal-scheduler $version" ] ||
  die "the image's binary says '$binary_version', not 'tidal-scheduler $version'"

log "packaging the chart"
"$helm" package "$repo/deploy/helm/tidal-scheduler" --destination "$out" >&2
chart="$out/tidal-scheduler-$version.tgz"
[ -f "$chart" ] || die "helm package wrote no $chart"
packaged="$("$helm" show chart "$chart")"
grep -qx "version: $version" <<<"$packaged" || die "the packaged chart's version is not $version"
grep -qx "appVersion: $version" <<<"$packaged" ||
  grep -qx "appVersion: \"$version\"" <<<"$packaged" || die "the packaged chart's appVersion is not $version"
rendered="$("$helm" template tidal-scheduler "$chart" --namespace tidal-system)"
grep -q "image: \"tidal-scheduler:$version\"" <<<"$rendered" ||
  die "the packaged chart does not run tidal-scheduler:$version by default"

(cd "$out" && sha256sum "$(basename "$archive")" "$(basename "$chart")" >SHA256SUMS)
printf 'VERSION=%s\nCOMMIT=%s\nSNAPSHOT=%s\nDIRTY=%s\n' "$version" "$commit" "$snapshot" \
  "$([ -z "$dirty" ] && echo false || echo true)" >"$out/release.env"
if ! $snapshot && [ -z "$(awk -v v="$version" '$1 == v' "$repo/release/releases")" ]; then
  log "not recorded yet: add the line \"$version $commit $(date -u +%F)\" (tab-separated) to release/releases and commit it"
fi
log "tidal-scheduler $version from $commit: $out"
echo "$out"
