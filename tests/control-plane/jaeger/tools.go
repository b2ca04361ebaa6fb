//go:build tools

// Package tools pins what provision.sh builds: Jaeger v2 (an OpenTelemetry Collector
// distribution: OTLP in, the query API out), for the tests that check traces.
package tools

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
