package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// bigStaging is a staging of a large run written chunk by chunk with
// ff_stage_chunk (what writeChunks does), never committed.
type bigStaging struct {
	e     *env
	run   string
	uuids []string
	pf    *preparedFlow
	refs  *stageRefs
}

// newBigStaging writes the members of a run of n members, with a staging
// lifetime (ms), on partition 0.
func newBigStaging(e *env, n int, lifetime string) *bigStaging {
	e.t.Helper()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("m%05d", i))
	}
	f := flowOf("big", execs(names...))
	pf, err := prepareFlow(f)
	if err != nil {
		e.t.Fatal(err)
	}
	b := &bigStaging{e: e, run: newUUID(), uuids: make([]string, n), pf: pf}
	for i := range b.uuids {
		b.uuids[i] = newUUID()
	}
	b.refs = newStageRefs(f, "default", RunID("0."+b.run), []byte("in"))
	for start := 0; start < n; start += StageChunkExecs {
		args := []string{b.run, "default", "in", lifetime}
		for i := start; i < min(start+StageChunkExecs, n); i++ {
			args = append(append(args, strconv.Itoa(len(b.member(i)))), b.member(i)...)
		}
		if _, err := e.s.single(e.ctx, call{fn: "ff_stage_chunk", partition: 0, args: args}, "", "stage"); err != nil {
			e.t.Fatal(err)
		}
	}
	return b
}

func (b *bigStaging) member(i int) []string {
	b.e.t.Helper()
	m, err := b.pf.members[i].args(b.uuids, b.refs)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return m
}

// staged returns how many members the staging's set still lists.
func (b *bigStaging) staged() int64 {
	b.e.t.Helper()
	n, err := b.e.c.Do(b.e.ctx, b.e.c.B().Scard().Key(b.e.s.k.base(0)+":f:"+b.run+":staged").Build()).AsInt64()
	if err != nil {
		b.e.t.Fatal(err)
	}
	return n
}

// listed reports whether the staging is in B:staging.
func (b *bigStaging) listed() bool {
	b.e.t.Helper()
	err := b.e.c.Do(b.e.ctx, b.e.c.B().Zscore().Key(b.e.s.k.base(0)+":staging").Member(b.run).Build()).Error()
	if err != nil && !valkey.IsValkeyNil(err) {
		b.e.t.Fatal(err)
	}
	return err == nil
}

// commit is ff_commit_flow of the whole run, as stageCall makes it.
func (b *bigStaging) commit() error {
	b.e.t.Helper()
	args := []string{b.run, "default", "big", "", "", "1000", "in", "", strconv.Itoa(len(b.uuids))}
	for i, u := range b.uuids {
		m := b.member(i)
		args = append(args, m[0], u, m[2], m[3], m[5], "0")
	}
	_, err := b.e.s.single(b.e.ctx, call{fn: "ff_commit_flow", partition: 0, args: args}, ExecutionID(makeID(0, b.run)), "stage")
	if errors.Is(err, ErrNotFound) {
		return stagingExpired(ExecutionID(makeID(0, b.run)))
	}
	return err
}

// Retention deletes the members of abandoned chunked stagings about its
// limit per call, as it deletes a purged run's, whatever the size of a
// staging (a run has up to 10,000 members: one call deleting every member
// of a few such stagings blocked Valkey for over 100 ms). A staging stays
// listed until its last member is gone, and a commit arriving meanwhile
// refuses (staging_expired) rather than make the run visible without the
// members deleted. ff_commit_flow's own deletion of a staging it refuses
// is bounded too (STAGED_DROP_STEP = 1000 members), retention deleting the
// rest.
func TestPurgeDropsStagedMembersByLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	const stagings, members, limit = 4, 2500, 100
	var all []*bigStaging
	for range stagings {
		all = append(all, newBigStaging(e, members, "1")) // a lifetime of 1 ms: abandoned at once
	}
	time.Sleep(5 * time.Millisecond)
	res, err := e.s.PurgeTerminal(e.ctx, 0, 24*time.Hour, limit)
	if err != nil {
		t.Fatal(err)
	}
	if !res.More {
		t.Error("retention with stagings left to delete reported nothing more")
	}
	var gone int64
	var short *bigStaging
	for _, b := range all {
		n := b.staged()
		gone += members - n
		if n < members {
			short = b
		}
		if !b.listed() {
			t.Errorf("staging %s with %d members left is no longer listed", b.run, n)
		}
	}
	if gone < 1 || gone > limit {
		t.Fatalf("one retention call with limit %d deleted %d staged members of %d stagings of %d", limit, gone, stagings, members)
	}
	// A commit of the staging that lost members refuses; it deletes up to
	// STAGED_DROP_STEP of the others and leaves the staging listed (due).
	left := short.staged()
	if err := short.commit(); !errors.Is(err, ErrStagingExpired) {
		t.Fatalf("commit of a staging retention began deleting = %v, want ErrStagingExpired", err)
	}
	if n := short.staged(); n != max(left-1000, 0) || !short.listed() {
		t.Fatalf("after the refused commit the staging holds %d members (listed: %v), want %d", n, short.listed(), max(left-1000, 0))
	}
	e.purgeAll(ScanLimitMax)
	if extra := e.extraKeys(before); len(extra) != 0 {
		t.Fatalf("keys left by the abandoned stagings (%d): %.10v", len(extra), extra)
	}
	// Committing one now finds nothing: the staging expired.
	if err := all[0].commit(); !errors.Is(err, ErrStagingExpired) {
		t.Fatalf("commit of a deleted staging = %v, want ErrStagingExpired", err)
	}
}

// A large run whose staging stops between two chunks (the caller gave up,
// or a chunk failed) hands the chunks written to retention at once: the
// staging is due now, not after StagingTTL, and the next retention calls
// delete it.
func TestStageFlowGivenUpLeavesChunksToRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	var names []string
	for i := range 2*StageChunkExecs + 1 {
		names = append(names, fmt.Sprintf("m%04d", i))
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var run string
	e.s.hook = func(point, id string) {
		if point == "chunk" && run == "" {
			run = id
			cancel() // the caller gives up after the first chunk
		}
	}
	if _, _, err := e.s.StageFlow(ctx, StageRequest{Flow: flowOf("wide", execs(names...)), Input: []byte(`"in"`)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("StageFlow given up = %v, want context.Canceled", err)
	}
	b := &bigStaging{e: e, run: run}
	if n := b.staged(); n != StageChunkExecs {
		t.Fatalf("staged members after the first chunk: %d, want %d", n, StageChunkExecs)
	}
	due, err := e.c.Do(e.ctx, e.c.B().Zrangebyscore().Key(e.s.k.base(0)+":staging").Min("-inf").Max(strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()).AsStrSlice()
	if err != nil || len(due) != 1 || due[0] != run {
		t.Fatalf("stagings due now: %v, %v; want the one given up", due, err)
	}
	e.purgeAll(ScanLimitMax)
	if extra := e.extraKeys(before); len(extra) != 0 {
		t.Fatalf("keys left by the staging given up (%d): %.10v", len(extra), extra)
	}
}
