//go:build tools

// Package tools pins what provision.sh builds: the etcd server (the root package
// of go.etcd.io/etcd/server/v3 is its main). Kept apart from the Kubernetes module,
// which pins older etcd client modules.
package tools

import _ "go.etcd.io/etcd/server/v3"
