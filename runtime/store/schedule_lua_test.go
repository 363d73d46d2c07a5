package store

import "testing"

// spec/runtime.md, Principles: every state change is one FCALL
// that validates before its first write. These send arguments that pass
// the functions' own checks (numv, tonumber) but fail a later command of
// the call, after an earlier write.
func TestScheduleAndPauseArgsCheckedBeforeWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/api", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	put := func(next, source string) call {
		return call{fn: "ff_schedule_put", keys: []string{e.s.k.schedule("s1"), e.s.k.schedules()},
			args: []string{"s1", "tmpl", "@daily", "", "", "null", next, "1000", source}}
	}
	// tonumber(" 5") is 5 in Lua; ZADD refuses " 5" (and "1e999") as a float:
	// the HSET of the record came first.
	e.refusedUnchanged(`ff_schedule_put with next " 5"`, put(" 5", ""), "next")
	e.refusedUnchanged(`ff_schedule_put with next "1e999"`, put("1e999", ""), "next")
	e.refusedUnchanged(`ff_schedule_put from "elsewhere"`, put("1700000000000", "elsewhere"), "source")

	q := e.s.quotaPart("default/api")
	pause := func(end, length string) call {
		return call{fn: "ff_quota_pause", keys: []string{e.s.k.quota(q, "default/api"), e.s.k.quota(q, "default/api") + ":paused"},
			args: []string{end, "r", "", length}}
	}
	// A whole number far past any time PEXPIREAT takes.
	e.refusedUnchanged(`ff_quota_pause until 1e20`, pause("100000000000000000000", ""), "until")
	e.refusedUnchanged(`ff_quota_pause for 1e20 ms`, pause("", "100000000000000000000"), "for_ms")
}
