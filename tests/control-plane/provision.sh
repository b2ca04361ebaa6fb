#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd, the node's kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy, helm, the observability backends the tests
# run beside them, Jaeger, Prometheus and promtool, and the chaos scenarios' TCP proxy,
# Toxiproxy, from the Go module proxy into
# a cache directory outside the repository, keyed by version, and prints the directory
# holding all of them as the last line of stdout. Idempotent: seconds when cached.
#
#   provision.sh        what the tests need
#   provision.sh keda   only KEDA's operator and metrics API server (the peers benchmark,
#                       benches/peers/; several minutes cold), printing their directory
#   provision.sh api    what the control-plane suites need, no node: kube-apiserver,
#                       kubectl, etcd, Jaeger, Prometheus, Toxiproxy (the older minors'
#                       runs of .ci/run), printing their directory
#
# The versions are the ones pinned by the Go modules next to this script (kubernetes/MINOR/,
# etcd/, helm/, jaeger/, prometheus/, toxiproxy/, keda/ go.mod; go.sum verifies every
# download). kubernetes/wrapper.sh writes a new minor's module.
#
# Environment:
#   TIDAL_KUBERNETES_MINOR     the Kubernetes minor to build, one of kubernetes/*/ (default 1.37, the newest)
#   TIDAL_CONTROL_PLANE_CACHE  cache root (default $HOME/.cache/tidal-scheduler/control-plane)
#   GOPROXY, GOMODCACHE, ...   the usual Go settings
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache_root="${TIDAL_CONTROL_PLANE_CACHE:-${HOME:?HOME is not set}/.cache/tidal-scheduler/control-plane}"

log() { echo "provision: $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v go >/dev/null 2>&1 ||
  die "Go is required to build the test control plane (https://go.dev/dl/); no 'go' on PATH"

# The version a module requires, read from go.mod (single source of truth).
required_version() { # module-dir module-path
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' \
    "$here/$1/go.mod"
}
kubernetes_minor="${TIDAL_KUBERNETES_MINOR:-1.37}"
kubernetes_module="kubernetes/$kubernetes_minor"
[ -f "$here/$kubernetes_module/go.mod" ] ||
  die "no Kubernetes $kubernetes_minor here: TIDAL_KUBERNETES_MINOR is one of $(cd "$here/kubernetes" && ls -d -- */ | tr -d / | tr '\n' ' ')"
kubernetes_version="$(required_version "$kubernetes_module" k8s.io/kubernetes)"
etcd_version="$(required_version etcd go.etcd.io/etcd/server/v3)"
jaeger_version="$(required_version jaeger github.com/jaegertracing/jaeger)"
prometheus_version="$(required_version prometheus github.com/prometheus/prometheus)"
helm_version="$(required_version helm helm.sh/helm/v4)"
toxiproxy_version="$(required_version toxiproxy github.com/Shopify/toxiproxy/v2)"
[ -n "$kubernetes_version" ] && [ -n "$etcd_version" ] && [ -n "$jaeger_version" ] &&
  [ -n "$prometheus_version" ] && [ -n "$helm_version" ] && [ -n "$toxiproxy_version" ] ||
  die "cannot read pinned versions"

export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly

# Says every 30 s that NAME is still building (a cold kube-apiserver takes minutes).
progress() { # name
  local sleeper started=$SECONDS
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  while :; do
    sleep 30 &
    sleeper=$!
    wait "$sleeper"
    log "still building $1 ($((SECONDS - started)) s)"
  done
}

# Builds packages of one wrapper module into DIR, atomically: DIR appears only
# complete, so an interrupted build is redone rather than half-used, and of two
# concurrent builds the second to finish just discards its copy.
build() { # module-dir out-dir ldflags name=package...
  local module="$1" out="$2" ldflags="$3"
  shift 3
  if [ -d "$out" ]; then
    log "cached: $out"
    return
  fi
  log "building ${*%%=*} (cold: ~1 GB of module downloads and several minutes of CPU)"
  partial="$out.partial.$$"
  ticker=""
  trap 'rm -rf "$partial"; [ -z "$ticker" ] || kill "$ticker" 2>/dev/null' EXIT
  rm -rf "$partial"
  mkdir -p "$partial"
  log "downloading modules for $module"
  (cd "$here/$module" && go mod download) ||
    die "downloading Go modules failed; is the module proxy (GOPROXY=$(go env GOPROXY)) reachable?"
  local spec start
  for spec in "$@"; do
    start=$SECONDS
    progress "${spec%%=*}" >&2 &
    ticker=$!
    (cd "$here/$module" && go build -trimpath -ldflags "$ldflags" -o "$partial/${spec%%=*}" "${spec#*=}") ||
      die "go build ${spec#*=} failed"
    kill "$ticker"
    wait "$ticker" || true
    ticker=""
    log "built ${spec%%=*} in $((SECONDS - start)) s"
  done
  mv -T "$partial" "$out" 2>/dev/null || log "$out appeared meanwhile (a concurrent build); keeping it"
  rm -rf "$partial"
  trap - EXIT
}

if [ "${1:-}" = keda ]; then
  keda_version="$(required_version keda github.com/kedacore/keda/v2)"
  [ -n "$keda_version" ] || die "cannot read KEDA's pinned version"
  keda_dir="$cache_root/keda-$keda_version"
  build keda "$keda_dir" "-s -w -X github.com/kedacore/keda/v2/version.Version=$keda_version" \
    keda=github.com/kedacore/keda/v2/cmd/operator \
    keda-adapter=github.com/kedacore/keda/v2/cmd/adapter
  echo "$keda_dir"
  exit 0
fi

version_ldflags="-s -w"
for var in gitVersion=$kubernetes_version gitTreeState=clean \
  gitMajor="$(echo "$kubernetes_version" | cut -d. -f1 | tr -d v)" \
  gitMinor="$(echo "$kubernetes_version" | cut -d. -f2)"; do
  version_ldflags="$version_ldflags -X k8s.io/component-base/version.$var"
done

api_only=false
[ "${1:-}" = api ] && api_only=true

kubernetes_dir="$cache_root/kubernetes-$kubernetes_version"
etcd_dir="$cache_root/etcd-$etcd_version"
node_dir="$cache_root/kubernetes-node-$kubernetes_version"
build "$kubernetes_module" "$kubernetes_dir" "$version_ldflags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubectl=k8s.io/kubernetes/cmd/kubectl
$api_only || build "$kubernetes_module" "$node_dir" "$version_ldflags" \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
build etcd "$etcd_dir" "-s -w" etcd=go.etcd.io/etcd/server/v3
jaeger_dir="$cache_root/jaeger-$jaeger_version"
build jaeger "$jaeger_dir" "-s -w" jaeger=github.com/jaegertracing/jaeger/cmd/jaeger
# Without the service discovery plugins (the build tag remove_all_sd; static and file
# targets stay): the tests scrape static targets, and the cloud SDKs were two thirds of
# its cold build.
prometheus_dir="$cache_root/prometheus-$prometheus_version-static-sd"
GOFLAGS="$GOFLAGS -tags=remove_all_sd" build prometheus "$prometheus_dir" "-s -w" \
  prometheus=github.com/prometheus/prometheus/cmd/prometheus \
  promtool=github.com/prometheus/prometheus/cmd/promtool

toxiproxy_dir="$cache_root/toxiproxy-$toxiproxy_version"
build toxiproxy "$toxiproxy_dir" "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$toxiproxy_version" \
  toxiproxy=github.com/Shopify/toxiproxy/v2/cmd/server

# Links the binaries of the control-plane suites into directory $1.
link_control_plane() {
  mkdir -p "$1"
  ln -sfn "$kubernetes_dir/kube-apiserver" "$1/kube-apiserver"
  ln -sfn "$kubernetes_dir/kubectl" "$1/kubectl"
  ln -sfn "$etcd_dir/etcd" "$1/etcd"
  ln -sfn "$jaeger_dir/jaeger" "$1/jaeger"
  ln -sfn "$prometheus_dir/prometheus" "$1/prometheus"
  ln -sfn "$prometheus_dir/promtool" "$1/promtool"
  ln -sfn "$toxiproxy_dir/toxiproxy" "$1/toxiproxy"
}
if $api_only; then
  bin="$cache_root/bin-api-kubernetes-$kubernetes_version-etcd-$etcd_version"
  bin="$bin-jaeger-$jaeger_version-prometheus-$prometheus_version-toxiproxy-$toxiproxy_version"
  link_control_plane "$bin"
  echo "$bin"
  exit 0
fi

helm_dir="$cache_root/helm-$helm_version"
build helm "$helm_dir" "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
  helm=helm.sh/helm/v4/cmd/helm

# The node's pause image: kubernetes' pause.c, statically linked (an image any pod can
# run; containerd's sandbox image). Built here so that up.sh --node needs no compiler.
pause_dir="$cache_root/pause-$kubernetes_version"
if [ -d "$pause_dir" ]; then
  log "cached: $pause_dir"
else
  command -v cc >/dev/null 2>&1 || die "a C compiler (cc) is required to build the pause image"
  (cd "$here/$kubernetes_module" && go mod download k8s.io/kubernetes) || die "downloading k8s.io/kubernetes failed"
  source_dir="$(cd "$here/$kubernetes_module" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
  mkdir -p "$pause_dir.partial.$$"
  cc -static -O2 -s -DVERSION="$kubernetes_version" -o "$pause_dir.partial.$$/pause" \
    "$source_dir/build/pause/linux/pause.c" || die "building pause failed"
  mv -T "$pause_dir.partial.$$" "$pause_dir" 2>/dev/null || rm -rf "$pause_dir.partial.$$"
  log "built pause"
fi

# One directory with all of them, as the callers expect.
bin="$cache_root/bin-kubernetes-$kubernetes_version-etcd-$etcd_version-helm-$helm_version"
bin="$bin-jaeger-$jaeger_version-prometheus-$prometheus_version-toxiproxy-$toxiproxy_version"
link_control_plane "$bin"
for tool in kube-controller-manager kube-scheduler kubelet kube-proxy; do
  ln -sfn "$node_dir/$tool" "$bin/$tool"
done
ln -sfn "$helm_dir/helm" "$bin/helm"
ln -sfn "$pause_dir/pause" "$bin/pause"
for tool in kube-apiserver kubectl etcd jaeger prometheus promtool kube-controller-manager \
  kube-scheduler kubelet kube-proxy helm pause toxiproxy; do
  [ -x "$bin/$tool" ] || die "$bin/$tool is missing after the build"
done
echo "$bin"
