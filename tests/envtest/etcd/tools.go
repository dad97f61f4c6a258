//go:build tools

// Package tools records the etcd main package that scripts/build-envtest
// builds, so that `go mod tidy` keeps its modules in go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
