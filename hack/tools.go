//go:build tools

// Package tools pins k8s.io/code-generator in go.mod, so that
// hack/update-codegen.sh runs the generators of the version this module
// builds against.
package tools

import _ "k8s.io/code-generator"
