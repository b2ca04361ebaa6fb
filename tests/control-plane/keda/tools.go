//go:build tools

// Package tools pins what provision-peers.sh builds for the peers benchmark: KEDA's
// operator (with its cron scaler) and its metrics API server.
package tools

import (
	_ "github.com/kedacore/keda/v2/cmd/adapter"
	_ "github.com/kedacore/keda/v2/cmd/operator"
)
