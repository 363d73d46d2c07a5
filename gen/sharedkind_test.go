package gen

import (
	"context"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/gen/bind"
	"github.com/flowfabric/ff/runtime/worker"
)

// sharedKindHandlers implements the handlers of flows a and b below.
type sharedKindHandlers struct{}

func (sharedKindHandlers) X(context.Context) error { return nil }
func (sharedKindHandlers) Y(context.Context) error { return nil }

// TestSharedKindWarning: two flows sharing a kind get FF0902, which says
// what happens: one worker cannot register both flows, since the second
// Register<Flow> (bind.Register, which it calls) fails with "kind already
// has a handler".
func TestSharedKindWarning(t *testing.T) {
	src := "flow a() { exec x() {} }\nflow b() { exec y() { kind \"a.x\" } }\n"
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "k.ff", Data: []byte(src)}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var warning string
	for _, d := range diags {
		if d.Code == dsl.CodeSharedKind {
			warning = d.Message
		}
	}
	if warning == "" {
		t.Fatal("no FF0902")
	}
	w, err := worker.New(worker.Config{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bind.Register(w, &pkg.Flows[0], sharedKindHandlers{}); err != nil {
		t.Fatal(err)
	}
	err = bind.Register(w, &pkg.Flows[1], sharedKindHandlers{})
	if err == nil || !strings.Contains(err.Error(), "kind already has a handler") {
		t.Fatalf("registering both flows on one worker: %v", err)
	}
	for _, want := range []string{"cannot register both flows", "RegisterA", "RegisterB", "the kind already has a handler"} {
		if !strings.Contains(warning, want) {
			t.Errorf("FF0902 %q does not say %q", warning, want)
		}
	}
}
