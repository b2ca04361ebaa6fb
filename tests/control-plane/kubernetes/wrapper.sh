#!/usr/bin/env bash
# Writes the wrapper module that builds Kubernetes VERSION's binaries from the Go module
# proxy into DIR (go.mod, go.sum, tools.go): k8s.io/kubernetes at VERSION, every staging
# module it requires at v0.0.0 replaced by its released v0.MINOR.PATCH (k/k's own replaces
# do not apply to a dependency). Run once per version bump; the result is committed.
#
#   wrapper.sh 1.37.2 tests/control-plane/kubernetes/1.37
set -euo pipefail
version="${1:?usage: wrapper.sh VERSION DIR}"
dir="${2:?usage: wrapper.sh VERSION DIR}"
export GOWORK=off GOFLAGS=-mod=mod
mod="$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
[ -f "$mod" ] || { echo "wrapper: no go.mod for k8s.io/kubernetes@v$version" >&2; exit 1; }
staged="v0.${version#*.}"
mkdir -p "$dir"
cd "$dir"
go_version="$(awk '$1 == "go" { print $2; exit }' "$mod")"
{
  echo "module tidal.local/control-plane/kubernetes"
  echo
  echo "go $go_version"
  echo
  echo "require ("
  echo "	k8s.io/kubectl v0.0.0"
  echo "	k8s.io/kubernetes v$version"
  echo ")"
  echo
  echo "replace ("
  awk -v v="$staged" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s %s\n", $1, $1, v }' "$mod"
  echo ")"
} >go.mod
cat >tools.go <<'GO'
//go:build tools

// Package tools pins what provision.sh builds from k8s.io/kubernetes: kube-apiserver
// and kubectl for the control plane, and kube-controller-manager, kube-scheduler,
// kubelet and kube-proxy for the node (up.sh --node). go.mod replaces the staging
// modules with their released v0.x versions (k/k requires them at v0.0.0 and its own
// replaces do not apply to a dependency). Written by ../wrapper.sh.
package tools

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
go mod tidy
