package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/wire"
)

func TestFailureParts(t *testing.T) {
	f := func(exec, state, err string) wire.ExecFailure {
		return wire.ExecFailure{Exec: exec, State: state, Error: err}
	}
	many := func(n int) []wire.ExecFailure {
		var out []wire.ExecFailure
		for i := range n {
			out = append(out, f("k"+strconv.Itoa(i), "failed", "boom "+strconv.Itoa(i)))
		}
		return out
	}
	for _, tc := range []struct {
		in   []wire.ExecFailure
		want string
	}{
		{nil, ""},
		{[]wire.ExecFailure{f("a", "failed", "x")}, "a failed: x"},
		// Alike ones together, in the order of their first; an empty error.
		{[]wire.ExecFailure{f("a", "failed", "x"), f("b", "cancelled", "r"), f("c", "cancelled", "r"), f("d", "failed", "x"), f("e", "expired", "")},
			"a, d failed: x; b, c cancelled: r; e expired"},
		// Names stop at five: the rest of a group is counted in it, groups
		// not reached in a last part.
		{append([]wire.ExecFailure{f("a", "cancelled", "r"), f("b", "cancelled", "r"), f("c", "cancelled", "r"), f("d", "cancelled", "r")},
			f("e", "failed", "x"), f("f", "failed", "x"), f("g", "failed", "y")),
			"a, b, c, d cancelled: r; e and 1 more failed: x; and 1 more (failures lists them)"},
		{many(7), "k0 failed: boom 0; k1 failed: boom 1; k2 failed: boom 2; k3 failed: boom 3; k4 failed: boom 4; and 2 more (failures lists them)"},
	} {
		if got := strings.Join(failureParts(tc.in), "; "); got != tc.want {
			t.Errorf("failureParts(%v)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
