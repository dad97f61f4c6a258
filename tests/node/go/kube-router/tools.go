//go:build tools

// Package tools records the main package scripts/build-node builds.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
