//go:build tools

// Package tools records the main packages that scripts/build-node builds,
// so that `go mod tidy` keeps every module they need in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
