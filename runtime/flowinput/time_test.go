package flowinput_test

import (
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
)

// TestTimeIsRFC3339 checks that a time is refused unless it is an
// RFC 3339 date-time, as spec/api.md promises. time.Parse with
// time.RFC3339Nano is laxer than RFC 3339 (go.dev/issue/54580): it takes
// a one-digit hour, a comma before the fraction and zone offsets of 24
// hours or 60 minutes. Go's time.Time.UnmarshalJSON carries the strict
// checks but has them switched off for now; a worker in another language,
// or a later Go, refuses these values.
func TestTimeIsRFC3339(t *testing.T) {
	fl := &plan.Flow{Name: "f", Input: &plan.TypeRef{Kind: plan.KindTime}}
	for _, ok := range []string{
		`"2026-11-21T19:00:00Z"`,
		`"2026-11-21T19:00:00.123456789Z"`,
		`"2026-11-21T19:00:00+05:30"`,
		`"2026-11-21T19:00:00-00:00"`,
		`"2026-11-21T19:00:00.5+23:59"`,
	} {
		if err := flowinput.Flow(fl, "input", []byte(ok)); err != nil {
			t.Errorf("Flow(%s) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		`"2026-11-21T1:00:00Z"`,         // one-digit hour
		`"2026-11-21T19:00:00,5Z"`,      // comma before the fraction
		`"2026-11-21T19:00:00+24:00"`,   // zone offset hour out of range
		`"2026-11-21T19:00:00+23:60"`,   // zone offset minute out of range
		`"2026-11-21T19:00:00.5+24:00"`, // the same with a fraction
	} {
		if err := flowinput.Flow(fl, "input", []byte(bad)); err == nil {
			t.Errorf("Flow(%s) = nil, want an error: not an RFC 3339 time", bad)
		}
	}
}
