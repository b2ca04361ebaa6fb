//go:build tools

// Package tools pins what provision.sh builds for the chart tests: the helm CLI.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
