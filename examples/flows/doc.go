// Package flows holds the example .ff flows (media pipeline, LLM fan-out,
// nightly ETL, order workflow), the Go code ffc generates from them
// (flows_ff.go, committed; regenerate with `go generate`) and a demo
// implementation of every flow's Handlers interface (handlers.go) that
// needs no network, is deterministic and can inject failures.
package flows

//go:generate go run github.com/flowfabric/ff/cmd/ffc gen -o flows_ff.go .
