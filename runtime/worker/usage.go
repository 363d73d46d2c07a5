package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// usageRetries bounds the attempts of one usage report on transport errors
// and refusals that pass.
const usageRetries = 4

// ErrNoServer is returned by Task.ReportUsage for a task that did not come
// from a server (NewTestTask).
var ErrNoServer = errors.New("worker: the task is not connected to a server")

// taskUsage is what a task needs to report usage under its lease.
type taskUsage struct {
	c     *client.Client
	lease wire.Lease
	seq   atomic.Int64
}

// UsageResult is what a usage report did to one budget of the execution.
type UsageResult = wire.UsageResult

// PauseQuota holds back every execution admitted under a subject of quota
// id ("<namespace>/<name>", such as "default/mail"; key: the key value of
// a keyed quota, else "") for d: a handler told
// by an upstream "429, retry after 60 s" pauses the quota its calls count
// against, so that no other attempt is started against that upstream
// meanwhile, and then returns an error so that this attempt is retried
// (its retry waits for the pause too). reason is shown as the blocked
// executions' detail. Attempts already running are not stopped.
func (t *Task) PauseQuota(ctx context.Context, id, key string, d time.Duration, reason string) error {
	u := t.usage
	if u == nil {
		return ErrNoServer
	}
	if d < time.Millisecond {
		return fmt.Errorf("worker: pause quota %s: %s is shorter than a millisecond", id, d)
	}
	rctx, cancel := context.WithTimeout(ctx, requestSlack)
	defer cancel()
	if _, err := u.c.PauseQuota(rctx, id, wire.QuotaPause{Key: key, ForMs: d.Milliseconds(), Reason: reason}); err != nil {
		return fmt.Errorf("worker: pause quota %s: %w", id, err)
	}
	return nil
}

// ReportUsage reports that this attempt used delta (≥ 0) more of dimension
// (tokens, dollars_micros, …); it counts against every budget of the
// execution that meters the dimension. Each call has its own dedup key
// (the attempt's lease plus a per-task counter) that its retries reuse, so
// a request retried after a lost answer counts once. A budget reaching its
// hard limit blocks (or fails) further grants of the work counting against
// it; this attempt keeps running. The results say where each budget stands.
func (t *Task) ReportUsage(ctx context.Context, dimension string, delta int64) ([]UsageResult, error) {
	u := t.usage
	if u == nil {
		return nil, ErrNoServer
	}
	n := u.seq.Add(1)
	req := wire.ExecutionUsageReport{LeaseID: u.lease.LeaseID, Epoch: u.lease.Epoch,
		Dimension: dimension, Delta: delta, DedupKey: "a" + strconv.Itoa(t.attempt) + "-u" + strconv.FormatInt(n, 10)}
	delay := retryDelayMin
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, requestSlack)
		res, err := u.c.ReportExecutionUsage(rctx, t.id, req)
		cancel()
		if err == nil {
			return res, nil
		}
		var ae *client.APIError
		isAPI := errors.As(err, &ae)
		if isAPI && !client.Passing(ae) || try == usageRetries || ctx.Err() != nil {
			return nil, fmt.Errorf("worker: report usage of %s (%s +%d): %w", t.id, dimension, delta, err)
		}
		wait := delay
		if isAPI {
			wait = max(wait, ae.RetryAfter) // a 429's Retry-After
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker: report usage of %s: %w", t.id, ctx.Err())
		case <-time.After(wait):
		}
		delay = min(delay*2, retryDelayMax)
	}
}

// heartbeatRequest is this worker's registration.
func (w *Worker) heartbeatRequest() wire.WorkerHeartbeat {
	ttl := min(max(3*w.cfg.RenewInterval, wire.LeaseMsMin*time.Millisecond), wire.LeaseMsMax*time.Millisecond)
	hb := wire.WorkerHeartbeat{WorkerID: w.cfg.Name, InstanceID: w.instance, Namespace: w.cfg.Namespace,
		Lanes: w.cfg.Lanes, Capabilities: w.cfg.Capabilities, Kinds: w.kinds, TTLMs: ttl.Milliseconds()}
	if w.hbNoKinds.Load() {
		hb.Kinds = nil
	}
	return hb
}

// connect registers the worker with its capabilities before it claims. A
// refusal (a bad capability, lane or token) stops Run with the server's
// reason; a transport error or a refusal that passes (client.Passing: a 429 while
// the address is limited) does not (the claims register it too).
func (w *Worker) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, requestSlack)
	defer cancel()
	err := w.sendHeartbeat(cctx)
	var ae *client.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && !client.Passing(ae) && ae.Status != http.StatusNotFound &&
		ae.Status != http.StatusMethodNotAllowed && ae.Status != http.StatusNotImplemented:
		return fmt.Errorf("worker: connect refused: %w", err)
	default:
		w.log.WarnContext(ctx, "connect failed; claiming anyway", "error", err)
		return nil
	}
}

// heartbeatLoop sends the worker's heartbeat every RenewInterval, which
// keeps it listed (for 3 × RenewInterval: heartbeatRequest), on its own
// tick rather than after the renewals: a renewal the server is slow to
// answer is waited for up to its leases' expiry less half a RenewInterval
// (renewDeadline), longer than the listing lasts, and a live worker would
// drop off the list (and out of wait hints and capability routing)
// meanwhile. After a refusal that said when to try again (a 429's
// Retry-After), the next heartbeat waits for that.
func (w *Worker) heartbeatLoop(ctx context.Context, done <-chan struct{}) {
	t := time.NewTimer(w.cfg.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		hint := w.heartbeat(ctx)
		t.Reset(max(time.Until(start.Add(w.cfg.RenewInterval)), hint))
	}
}

// heartbeat keeps the worker listed (GET /v1/workers, capability
// routing). It returns how long the server said to wait when it refused
// the heartbeat (APIError.RetryAfter; 0 when none said).
func (w *Worker) heartbeat(ctx context.Context) time.Duration {
	hctx, cancel := context.WithTimeout(ctx, w.cfg.RenewInterval)
	defer cancel()
	err := w.sendHeartbeat(hctx)
	if err != nil && ctx.Err() == nil {
		w.log.WarnContext(ctx, "heartbeat failed", "error", err)
	}
	return retryAfter(err)
}

// leave takes the stopped worker out of the registry (GET /v1/workers,
// wait hints, capability routing) at once rather than when its last
// heartbeat's ttl runs out: it sends a last heartbeat with the smallest
// ttl, by deadline (Run's bound) and within requestSlack. A failure is
// harmless: the registration expires on its own.
func (w *Worker) leave(ctx context.Context, deadline time.Time) {
	wait := min(time.Until(deadline), requestSlack)
	if wait <= 0 {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	hb := w.heartbeatRequest()
	hb.TTLMs = wire.LeaseMsMin
	if _, err := w.c.Heartbeat(lctx, hb); err != nil {
		w.log.InfoContext(ctx, "leaving the worker registry failed; the registration expires on its own", "error", err)
	}
}

// sendHeartbeat sends the worker's registration. A server older than kinds
// in heartbeats refuses the field (or a long list's size): the heartbeat
// is sent again without them, and so are all later ones. Wait hints then
// do not know the worker's kinds; its claims still name them.
func (w *Worker) sendHeartbeat(ctx context.Context) error {
	_, err := w.c.Heartbeat(ctx, w.heartbeatRequest())
	var ae *client.APIError
	if len(w.kinds) > 0 && !w.hbNoKinds.Load() && errors.As(err, &ae) &&
		(ae.Code == wire.CodeUnknownField && strings.Contains(ae.Message, "kinds") || ae.Status == http.StatusRequestEntityTooLarge) {
		w.hbNoKinds.Store(true)
		w.log.InfoContext(ctx, "the server does not take kinds in heartbeats; sending them without", "error", err)
		_, err = w.c.Heartbeat(ctx, w.heartbeatRequest())
	}
	return err
}
