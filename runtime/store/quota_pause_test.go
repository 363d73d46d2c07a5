package store

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A paused quota subject admits nothing until the pause ends: what needs
// it is blocked with the pause's end and reason, checked again at the end
// (here before the recheck bound), and runs then. Attempts admitted before
// keep running. A keyed quota's other keys are not held back.
func TestQuotaPauseHoldsBackAdmissionsUntilItEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/api", Concurrency: 10, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	mk := func(tenant string) *Execution {
		return e.create(CreateRequest{Quotas: []string{"api"}, Payload: []byte(`{"tenant":"` + tenant + `"}`)})
	}
	running := mk("acme")
	g := e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 || g[0].ExecutionID != running.ID {
		t.Fatalf("granted %v, want %s", grantIDs(g), running.ID)
	}

	// Long enough for what the test does during the pause under -race on
	// busy cores; it sleeps until the end anyway.
	until := time.Now().Add(3 * time.Second)
	if err := e.s.PauseQuota(e.ctx, "default/api", QuotaPause{Key: "acme", End: until, Reason: "upstream said 429"}); err != nil {
		t.Fatal(err)
	}
	held, other := mk("acme"), mk("globex")
	g2 := e.claimAdm(worker1, 2, time.Minute)
	if diff := cmp.Diff([]ExecutionID{other.ID}, grantIDs(g2)); diff != "" {
		t.Fatalf("grants during the pause (-want +got):\n%s", diff)
	}
	v := e.wantState(held.ID, StateBlocked).State
	want := "quota default/api=acme: paused until " + time.UnixMilli(until.UnixMilli()).UTC().Format(time.RFC3339) + " (upstream said 429)"
	if v.BlockingReason != WaitingForQuota || v.BlockingDetail != want {
		t.Fatalf("blocked %s %q, want %s %q", v.BlockingReason, v.BlockingDetail, WaitingForQuota, want)
	}
	// The quota shows the pause; the running attempt kept its slot.
	q := e.quota("default/api")
	if len(q.Subjects) != 2 || q.Subjects[0].Key != "acme" || q.Subjects[0].Active != 1 ||
		q.Subjects[0].PausedUntil.UnixMilli() != until.UnixMilli() || q.Subjects[0].PauseReason != "upstream said 429" ||
		!q.Subjects[1].PausedUntil.IsZero() {
		t.Fatalf("quota during the pause: %+v", q.Subjects)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := e.unblockAll(); n != 0 {
		t.Fatalf("unblocked %d during the pause", n)
	}
	time.Sleep(time.Until(until) + 50*time.Millisecond)
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("unblocked %d after the pause ended, want 1", n)
	}
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 1 || g[0].ExecutionID != held.ID {
		t.Fatalf("granted %v after the pause, want %s", grantIDs(g), held.ID)
	}
	if q := e.quota("default/api"); !q.Subjects[0].PausedUntil.IsZero() {
		t.Fatalf("the pause is still shown after its end: %+v", q.Subjects[0])
	}
}

// A pause ended early by ResumeQuota admits at once, and what it blocked
// is checked again within Config.PauseRecheck (not at the pause's end).
func TestQuotaResumeEndsAPauseEarly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1; c.PauseRecheck = 300 * time.Millisecond })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/api", Rate: 100}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.PauseQuota(e.ctx, "default/api", QuotaPause{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	x := e.create(CreateRequest{Quotas: []string{"api"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v during the pause", grantIDs(g))
	}
	if v := e.wantState(x.ID, StateBlocked).State; !strings.HasPrefix(v.BlockingDetail, "quota default/api: paused until ") ||
		strings.Contains(v.BlockingDetail, "(") {
		t.Fatalf("blocked %q, want the pause without a reason", v.BlockingDetail)
	}
	resumed, err := e.s.ResumeQuota(e.ctx, "default/api", "")
	if err != nil || !resumed {
		t.Fatalf("ResumeQuota = %v, %v; want resumed", resumed, err)
	}
	if again, err := e.s.ResumeQuota(e.ctx, "default/api", ""); err != nil || again {
		t.Fatalf("ResumeQuota again = %v, %v; want nothing to resume", again, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.unblockAll() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the execution a resumed pause blocked was not checked again within the recheck bound")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 1 || g[0].ExecutionID != x.ID {
		t.Fatalf("granted %v after the resume, want %s", grantIDs(g), x.ID)
	}
}

// Bad pauses are refused with the field at fault and write nothing.
func TestQuotaPauseRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/plain", Rate: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/keyed", Rate: 1, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	// A pause in force, which a refused pause must leave as it is.
	if err := e.s.PauseQuota(e.ctx, "default/keyed", QuotaPause{Key: "acme", For: time.Hour, Reason: "first"}); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot()
	soon := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name, id string
		p        QuotaPause
		field    string
	}{
		{"a keyed quota without its key value", "default/keyed", QuotaPause{End: soon}, "key"},
		{"a key value for an unkeyed quota", "default/plain", QuotaPause{Key: "acme", End: soon}, "key"},
		{"an end that passed", "default/plain", QuotaPause{End: time.Now().Add(-time.Second)}, "until"},
		{"an end too far away", "default/plain", QuotaPause{End: time.Now().Add(QuotaPauseMax + time.Hour)}, "until"},
		{"an end and a length", "default/plain", QuotaPause{End: soon, For: time.Minute}, "for_ms"},
		{"neither", "default/plain", QuotaPause{}, "for_ms"},
		{"a length too long", "default/plain", QuotaPause{For: QuotaPauseMax + time.Hour}, "for_ms"},
		{"a reason too long", "default/plain", QuotaPause{End: soon, Reason: strings.Repeat("r", MaxPauseReasonBytes+1)}, "reason"},
		{"a reason with a newline", "default/plain", QuotaPause{End: soon, Reason: "a\nb"}, "reason"},
		{"a key value too long", "default/keyed", QuotaPause{Key: strings.Repeat("k", MaxQuotaKeyBytes+1), End: soon}, "key"},
		{"a key value no input can give", "default/keyed", QuotaPause{Key: "Acme Corp", End: soon}, "key"},
		{"a key value with a comma", "default/keyed", QuotaPause{Key: "a,b", End: soon}, "key"},
		{"a malformed id", "nope", QuotaPause{End: soon}, "id"},
	} {
		err := e.s.PauseQuota(e.ctx, tc.id, tc.p)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want a validation error of %s", tc.name, err, tc.field)
		}
	}
	if err := e.s.PauseQuota(e.ctx, "default/none", QuotaPause{End: soon}); !errors.Is(err, ErrNotFound) {
		t.Errorf("pausing an undefined quota: %v, want not found", err)
	}
	if _, err := e.s.ResumeQuota(e.ctx, "default/none", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("resuming an undefined quota: %v, want not found", err)
	}
	// The function checks its arguments itself, before any write.
	q := e.s.quotaPart("default/keyed")
	keys := []string{e.s.k.quota(q, "default/keyed"), e.s.k.quota(q, "default/keyed=zeta") + ":paused"}
	for _, tc := range []struct {
		args  []string
		field string
	}{
		{[]string{"soon", "", "zeta", ""}, "until"},
		{[]string{"-5", "", "zeta", ""}, "until"},
		{[]string{"1.5", "", "zeta", ""}, "until"},
		{[]string{"", "", "zeta", "0"}, "for_ms"},
		{[]string{"", "", "zeta", "x"}, "for_ms"},
		{[]string{"", "", "zeta"}, "args"},
		{[]string{strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10), ""}, "args"},
	} {
		_, err := e.s.single(e.ctx, call{fn: "ff_quota_pause", keys: keys, args: tc.args}, "", "pause quota")
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("ff_quota_pause %q: %v, want invalid %s", tc.args, err, tc.field)
		}
	}
	if diff := cmp.Diff(before, e.snapshot()); diff != "" {
		t.Fatalf("refused pauses changed keys (-before +after):\n%s", diff)
	}
}
