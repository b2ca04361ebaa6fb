//go:build tools

// Package tools pins what provision.sh builds for the chaos scenarios: Toxiproxy, the TCP
// proxy that cuts, black-holes and slows a replica's connection to kube-apiserver.
package tools

import (
	_ "github.com/Shopify/toxiproxy/v2/cmd/server"
)
