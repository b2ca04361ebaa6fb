//go:build tools

// Package tools pins what provision.sh builds: kube-apiserver and kubectl from
// k8s.io/kubernetes, whose staging modules go.mod replaces with their released
// v0.x versions (k/k requires them at v0.0.0 and its own replaces do not apply to
// a dependency).
package tools

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
