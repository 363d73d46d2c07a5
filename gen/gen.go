// Package gen writes typed Go code for a compiled .ff package.
package gen

import (
	"errors"

	"github.com/flowfabric/ff/compiler/plan"
)

// Options control code generation.
type Options struct {
	// Package is the Go package name of the generated file. When empty,
	// the plan's package name is used.
	Package string
}

// Generate returns the gofmt'ed Go source for pkg.
func Generate(pkg *plan.Package, opts Options) ([]byte, error) {
	return nil, errors.New("gen: not implemented")
}
