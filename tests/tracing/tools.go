//go:build tools

// Package tools records the main package that scripts/build-jaeger builds,
// so that `go mod tidy` keeps every module it needs in go.mod and go.sum.
package tools

import (
	_ "github.com/jaegertracing/jaeger/cmd/jaeger"
)
