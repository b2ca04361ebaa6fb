//go:build tools

// Package tools pins what provision.sh builds: Prometheus (scrapes the controller in
// the tests; its web UI's assets are not needed for the query API) and promtool (lints
// the exposition, unit-tests the alerting rules).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
