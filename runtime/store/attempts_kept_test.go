package store

import (
	"strconv"
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

// TestAttemptsKeptOfOlderRecords: a record an earlier release wrote with
// more than AttemptsKept attempts (it kept them all) answers with the last
// AttemptsKept, and does not grow with the attempts this release starts.
func TestAttemptsKeptOfOlderRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	p, uuid, err := e.s.locate(x.ID)
	if err != nil {
		t.Fatal(err)
	}
	const older = AttemptsKept + 50
	for range older {
		e.claim(x.ID, worker1, time.Minute)
		if _, err := e.s.RevokeLease(e.ctx, x.ID, "again"); err != nil {
			t.Fatal(err)
		}
	}
	// The history an earlier release left: attempts 1..50 too.
	for n := 1; n <= older-AttemptsKept; n++ {
		f := "att:" + strconv.Itoa(n)
		err := e.c.Do(e.ctx, e.c.B().Hset().Key(e.s.k.core(p, uuid)).FieldValue().
			FieldValue(f, "initial\tw1\tw1-a\tl\t1\t1").FieldValue(f+":end", "2\trevoked\tagain").Build()).Error()
		if err != nil {
			t.Fatal(err)
		}
	}
	hlen := func() int64 {
		n, err := e.c.Do(e.ctx, e.c.B().Hlen().Key(e.s.k.core(p, uuid)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := hlen()
	for range 10 {
		e.claim(x.ID, worker1, time.Minute)
		if _, err := e.s.RevokeLease(e.ctx, x.ID, "again"); err != nil {
			t.Fatal(err)
		}
	}
	if n := hlen(); n > before {
		t.Fatalf("the record grew from %d to %d fields over 10 attempts", before, n)
	}
	got := e.get(x.ID).Attempts
	if len(got) != AttemptsKept || got[0].Index != older+10-AttemptsKept+1 || got[len(got)-1].Index != older+10 {
		t.Fatalf("history of %d attempts from %d to %d; want the last %d", len(got), got[0].Index, got[len(got)-1].Index, AttemptsKept)
	}
}
