//go:build tools

// Package tools pins what provision.sh builds from k8s.io/kubernetes: kube-apiserver
// and kubectl for the control plane, and kube-controller-manager, kube-scheduler,
// kubelet and kube-proxy for the node (up.sh --node). go.mod replaces the staging
// modules with their released v0.x versions (k/k requires them at v0.0.0 and its own
// replaces do not apply to a dependency).
package tools

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
