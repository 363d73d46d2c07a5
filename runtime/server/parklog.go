package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/scanner"
	"github.com/flowfabric/ff/runtime/store"
)

// parkLog logs (info) every execution that admission parked — waiting for a
// budget, a quota or a capable worker — once, with the reason and the
// human-readable detail, and when it leaves the blocked state. It reads
// the blocked executions of every namespace with lanes or workers (and the
// default namespace) once per interval, at most parkLogPage per namespace:
// the blocked ones of a namespace whose workers all left are still parked.
type parkLog struct {
	loop
	st  *store.Store
	log *slog.Logger

	mu     sync.Mutex
	parked map[store.ExecutionID]string // id → reason and detail last logged
}

const parkLogPage = store.ListLimitMax

func newParkLog(st *store.Store, log *slog.Logger, interval time.Duration) *parkLog {
	if interval <= 0 {
		interval = scanner.UnblockIntervalDefault // it runs with the unblock scanner
	}
	p := &parkLog{st: st, log: log, parked: map[store.ExecutionID]string{}}
	p.loop.name, p.loop.interval, p.loop.tick = "park log", interval, p.tick
	return p
}

func (p *parkLog) tick(ctx context.Context) {
	nss, err := p.st.KnownNamespaces(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.DebugContext(ctx, "park log: list namespaces", slog.Any("error", err))
		}
		return
	}
	if !slices.Contains(nss, plan.DefaultNamespace) {
		nss = append(nss, plan.DefaultNamespace)
	}
	now := map[store.ExecutionID]*store.Execution{}
	for _, ns := range nss {
		page, err := p.st.ListExecutions(ctx, store.ListRequest{Namespace: ns, State: store.StateBlocked, Limit: parkLogPage})
		if err != nil {
			if ctx.Err() == nil {
				p.log.DebugContext(ctx, "park log: list blocked executions", slog.String("namespace", ns), slog.Any("error", err))
			}
			return // judge nothing on a partial view
		}
		for _, ex := range page.Executions {
			now[ex.ID] = ex
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, ex := range now {
		why := string(ex.State.BlockingReason) + "\x00" + ex.State.BlockingDetail
		if p.parked[id] == why {
			continue
		}
		p.parked[id] = why
		p.log.InfoContext(ctx, "execution parked", slog.String("execution_id", string(id)),
			slog.String("namespace", ex.Namespace), slog.String("lane", ex.Lane), slog.String("kind", ex.Kind),
			slog.String("blocking_reason", string(ex.State.BlockingReason)), slog.String("blocking_detail", ex.State.BlockingDetail))
	}
	for id := range p.parked {
		if now[id] == nil {
			delete(p.parked, id)
			p.log.InfoContext(ctx, "execution no longer parked", slog.String("execution_id", string(id)))
		}
	}
}
