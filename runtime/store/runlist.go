package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/compiler/plan"
)

// RunListRequest selects one page of ListRuns.
type RunListRequest struct {
	Namespace string
	Flow      string   // only runs of this flow ("" = every flow)
	State     RunState // only runs in this state ("" = every state)
	Cursor    string   // RunPage.Cursor of the page before ("" = from the newest run)
	Limit     int      // 1..ListLimitMax; 0 = ListLimitDefault
}

// RunPage is one page of ListRuns.
type RunPage struct {
	Runs []*Run // newest first; without members, result exec, result or input
	// Cursor is passed back for the next page; "" when no run is left.
	Cursor string
	at     []runPos // where each of Runs is in the listing
}

// CursorAfter returns the cursor of a page that goes on after Runs[i],
// for a caller that takes only the page's first i+1 runs.
func (p *RunPage) CursorAfter(i int) string { return p.at[i].encode() }

// runScanMax bounds how many index entries one ListRuns call looks at: a
// filter may discard many.
const runScanMax = 10 * ListLimitMax

// runListFields are the run record fields a listed run is built from
// (runOf), done and succeeded for records staged before left existed.
var runListFields = []string{"ns", "flow", "state", "total", "left", "failed", "skipped", "cancelled",
	"created_at", "ended_at", "done", "succeeded"}

// runPos is a place in the order of ListRuns: newest first by staging
// time (ms), then by id, descending.
type runPos struct {
	ms int64
	id RunID
}

// before reports whether a comes after b in the listing (is older).
func (a runPos) before(b runPos) bool {
	return a.ms < b.ms || a.ms == b.ms && a.id < b.id
}

func (a runPos) encode() string { return strconv.FormatInt(a.ms, 10) + ":" + string(a.id) }

func decodeRunPos(s string) (runPos, error) {
	ms, id, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || n < 0 {
		return runPos{}, invalid("cursor", "malformed cursor")
	}
	if _, _, err := splitID(id); err != nil {
		return runPos{}, invalid("cursor", "malformed cursor")
	}
	return runPos{n, RunID(id)}, nil
}

// runSource reads one partition's run index of a namespace, newest first,
// from the cursor on.
type runSource struct {
	p   int
	key string
	// Reads go on after last (the last entry read, or the cursor), not
	// from an offset: runs staged or purged between two reads of one call
	// move the entries' offsets. tied entries of last's time were read (or
	// are at or before the cursor): a read takes them again, and drops them.
	last *runPos
	tied int64
	buf  []runPos // read and not merged yet
	done bool     // the index has nothing after buf
}

// ListRuns returns one page of the runs of a namespace, newest first,
// optionally only those of one flow or in one state. Runs are listed from
// their staging until retention deletes them. The filters are applied as
// the index is read, at most runScanMax entries per call: a page may hold
// fewer runs than the limit, even none, and still have a cursor. Pages are
// a live view: a run staged while paging is not in the later pages (it is
// newer than their cursor), and a run's state may have changed since its
// page was read.
func (s *Store) ListRuns(ctx context.Context, req RunListRequest) (*RunPage, error) {
	if err := checkName("namespace", req.Namespace); err != nil {
		return nil, err
	}
	if req.Flow != "" {
		if err := plan.ValidateName(req.Flow); err != nil {
			return nil, invalid("flow", "%q: %v", req.Flow, err)
		}
	}
	switch req.State {
	case "", RunRunning, RunSucceeded, RunFailed, RunCancelled:
	default:
		return nil, invalid("state", "%q is not a run state (running, succeeded, failed or cancelled)", req.State)
	}
	limit := req.Limit
	if limit == 0 {
		limit = ListLimitDefault
	}
	if limit < 1 || limit > ListLimitMax {
		return nil, invalid("limit", "%d is outside 1..%d", limit, ListLimitMax)
	}
	var cur *runPos
	if req.Cursor != "" {
		c, err := decodeRunPos(req.Cursor)
		if err != nil {
			return nil, err
		}
		cur = &c
	}
	srcs := make([]*runSource, s.cfg.FlowPartitions)
	for p := range srcs {
		srcs[p] = &runSource{p: p, key: s.k.runsByNamespace(p, req.Namespace), last: cur}
	}
	page := &RunPage{}
	scanned := 0
	var last *runPos // the last entry looked at
	for len(page.Runs) < limit && scanned < runScanMax {
		want := min(max(limit-len(page.Runs), 32), runScanMax-scanned)
		if err := s.fillRunSources(ctx, srcs, want); err != nil {
			return nil, err
		}
		batch := mergeRuns(srcs, want)
		if len(batch) == 0 {
			page.Cursor = "" // every index is exhausted
			return page, nil
		}
		runs, err := s.readListedRuns(ctx, req.Namespace, batch)
		if err != nil {
			return nil, err
		}
		for i, r := range runs {
			if len(page.Runs) == limit {
				// The rest of the batch is looked at again by the next page.
				return page, nil
			}
			scanned++
			last = &batch[i]
			page.Cursor = last.encode()
			if r != nil && (req.Flow == "" || r.Flow == req.Flow) && (req.State == "" || r.State == req.State) {
				page.Runs = append(page.Runs, r)
				page.at = append(page.at, batch[i])
			}
		}
	}
	if last != nil && runSourcesEmpty(srcs) {
		page.Cursor = "" // nothing is left after the last entry
	}
	return page, nil
}

// fillRunSources reads up to want more entries of every index whose buffer
// is empty, in one round trip (more when every entry read was at or
// before where the index's reads stopped, as when many runs were staged in
// its millisecond). It asks for one entry more than it wants, so that an
// index holding exactly want more is known to be done (the page of its
// last run has no cursor); the extra entry waits in the buffer.
func (s *Store) fillRunSources(ctx context.Context, srcs []*runSource, want int) error {
	for {
		var cmds valkey.Commands
		var which []*runSource
		for _, src := range srcs {
			if len(src.buf) == 0 && !src.done {
				top := "+inf"
				if src.last != nil {
					top = strconv.FormatInt(src.last.ms, 10) // inclusive: entries of the same time may follow it
				}
				cmds = append(cmds, s.c.B().Zrevrangebyscore().Key(src.key).Max(top).Min("-inf").Withscores().
					Limit(0, src.tied+int64(want)+1).Build())
				which = append(which, src)
			}
		}
		if len(cmds) == 0 {
			return nil
		}
		for i, r := range s.c.DoMulti(ctx, cmds...) {
			src := which[i]
			entries, err := r.AsZScores()
			if err != nil {
				return fmt.Errorf("store: list runs of partition %d: %w", src.p, err)
			}
			src.done = int64(len(entries)) <= src.tied+int64(want)
			var next *runPos
			for _, e := range entries {
				pos := runPos{int64(e.Score), RunID(makeID(src.p, e.Member))}
				if src.last == nil || pos.before(*src.last) {
					src.buf = append(src.buf, pos)
					next = &pos
				}
			}
			if next == nil { // all of them at or before last: of its time
				src.tied = int64(len(entries))
				continue
			}
			src.last, src.tied = next, 0
			for _, e := range entries {
				if int64(e.Score) == next.ms {
					src.tied++
				}
			}
		}
	}
}

// mergeRuns takes up to n entries in listing order from the buffers, and
// stops early when a buffer runs dry while its index has more: what it
// holds next may come first.
func mergeRuns(srcs []*runSource, n int) []runPos {
	var out []runPos
	for len(out) < n {
		var best *runSource
		for _, src := range srcs {
			if len(src.buf) == 0 {
				if !src.done {
					return out
				}
				continue
			}
			if best == nil || best.buf[0].before(src.buf[0]) {
				best = src
			}
		}
		if best == nil {
			return out
		}
		out = append(out, best.buf[0])
		best.buf = best.buf[1:]
	}
	return out
}

func runSourcesEmpty(srcs []*runSource) bool {
	for _, src := range srcs {
		if len(src.buf) > 0 || !src.done {
			return false
		}
	}
	return true
}

// readListedRuns reads the records of runs listed in namespace ns in one
// round trip: nil for a run deleted meanwhile, or whose record is not of ns.
func (s *Store) readListedRuns(ctx context.Context, ns string, batch []runPos) ([]*Run, error) {
	cmds := make(valkey.Commands, len(batch))
	for i, pos := range batch {
		p, uuid, err := splitID(string(pos.id))
		if err != nil {
			return nil, err
		}
		cmds[i] = s.c.B().Hmget().Key(s.k.run(p, uuid)).Field(runListFields...).Build()
	}
	out := make([]*Run, len(batch))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		vals, err := r.ToArray()
		if err != nil {
			return nil, fmt.Errorf("store: read run %s: %w", batch[i].id, err)
		}
		f := make(map[string]string, len(runListFields))
		for j, v := range vals {
			if s, err := v.ToString(); err == nil {
				f[runListFields[j]] = s
			}
		}
		if f["state"] == "" || f["ns"] != ns {
			continue
		}
		out[i] = runOf(batch[i].id, f)
	}
	return out, nil
}

// runsByNamespace is the index of the runs of namespace ns on partition p
// (B:runs:ns:<ns>, score = creation ms), which listings read and
// retention prunes.
func (k keys) runsByNamespace(p int, ns string) string { return k.base(p) + ":runs:ns:" + ns }
