package store

import (
	"testing"
	"time"
)

// TestAttemptsKept: each attempt's start drops the history of the attempt
// AttemptsKept before it, so the record of an execution reclaimed or
// revoked without end stays bounded, and the history read back is the
// last AttemptsKept attempts in order.
func TestAttemptsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	p, uuid, err := e.s.locate(x.ID)
	if err != nil {
		t.Fatal(err)
	}
	fields := func() int64 {
		n, err := e.c.Do(e.ctx, e.c.B().Hlen().Key(e.s.k.core(p, uuid)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var atKept int64
	for i := 1; i <= AttemptsKept+20; i++ {
		e.claim(x.ID, worker1, time.Minute)
		if _, err := e.s.RevokeLease(e.ctx, x.ID, "again"); err != nil {
			t.Fatal(err)
		}
		if i == AttemptsKept {
			atKept = fields()
		}
	}
	if n := fields(); n != atKept {
		t.Fatalf("the record grew from %d to %d fields over 20 more attempts", atKept, n)
	}
	got := e.get(x.ID).Attempts
	if len(got) != AttemptsKept || got[0].Index != 21 || got[len(got)-1].Index != AttemptsKept+20 {
		t.Fatalf("history of %d attempts from %d to %d; want %d from 21", len(got), got[0].Index, got[len(got)-1].Index, AttemptsKept)
	}
	for i, a := range got {
		if a.Index != 21+i || a.Outcome != AttemptRevoked {
			t.Fatalf("attempt %d of the history: %+v", i, a)
		}
	}
}
