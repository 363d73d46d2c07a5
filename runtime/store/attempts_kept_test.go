package store

import (
	"strconv"
	"testing"
	"time"
)

// revoked starts n attempts of execution id, revoking each (not charged:
// it is eligible again at once).
func (e *env) revoked(id ExecutionID, n int) {
	e.t.Helper()
	for range n {
		e.claim(id, worker1, time.Minute)
		if _, err := e.s.RevokeLease(e.ctx, id, "again"); err != nil {
			e.t.Fatal(err)
		}
	}
}

// recordFields returns how many fields execution id's record holds.
func (e *env) recordFields(id ExecutionID) int64 {
	e.t.Helper()
	p, uuid, err := e.s.locate(id)
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := e.c.Do(e.ctx, e.c.B().Hlen().Key(e.s.k.core(p, uuid)).Build()).AsInt64()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestAttemptsKept: each attempt's start drops the history of the attempt
// AttemptsKept before it, so the record of an execution reclaimed or
// revoked without end stays bounded, and the history read back is the
// last AttemptsKept attempts in order.
func TestAttemptsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	e.revoked(x.ID, AttemptsKept)
	atKept := e.recordFields(x.ID)
	e.revoked(x.ID, 20)
	if n := e.recordFields(x.ID); n != atKept {
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
	const older = AttemptsKept + 50
	e.revoked(x.ID, older)
	// The history an earlier release left: attempts 1..50 too.
	p, uuid, err := e.s.locate(x.ID)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= older-AttemptsKept; n++ {
		f := "att:" + strconv.Itoa(n)
		err := e.c.Do(e.ctx, e.c.B().Hset().Key(e.s.k.core(p, uuid)).FieldValue().
			FieldValue(f, "initial\tw1\tw1-a\tl\t1\t1").FieldValue(f+":end", "2\trevoked\tagain").Build()).Error()
		if err != nil {
			t.Fatal(err)
		}
	}
	before := e.recordFields(x.ID)
	e.revoked(x.ID, 10)
	if n := e.recordFields(x.ID); n > before {
		t.Fatalf("the record grew from %d to %d fields over 10 attempts", before, n)
	}
	got := e.get(x.ID).Attempts
	if len(got) != AttemptsKept || got[0].Index != older+10-AttemptsKept+1 || got[len(got)-1].Index != older+10 {
		t.Fatalf("history of %d attempts from %d to %d; want the last %d", len(got), got[0].Index, got[len(got)-1].Index, AttemptsKept)
	}
}
