package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/valkey-io/valkey-go"
)

// Claim atomically grants up to req.Max eligible executions of one partition
// and the given lanes of the worker's namespace, highest priority first then
// oldest, whose required capabilities the worker has. It returns no grants
// and no error when nothing is eligible.
//
// Candidates with quota references are granted only when req.Admitted
// holds an admission for their next attempt and reset count (a replay
// that resets a flow member counts it); otherwise they are passed
// over (ClaimAdmitted admits them). Candidates counting against a budget in
// req.BreachedBudgets are blocked or failed instead of granted.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) ([]Grant, error) {
	return s.claim(ctx, req, nil)
}

func (s *Store) claim(ctx context.Context, req ClaimRequest, needs *[]Candidate) ([]Grant, error) {
	if req.Partition < 0 || req.Partition >= s.cfg.FlowPartitions {
		return nil, invalid("partition", "%d is outside 0..%d", req.Partition, s.cfg.FlowPartitions-1)
	}
	ttl, caps, err := checkTaker(&req.Worker, req.Lanes, req.Max, req.LeaseTTL, "")
	if err != nil {
		return nil, err
	}
	kinds, err := normKinds("kinds", req.Kinds)
	if err != nil {
		return nil, err
	}
	union := "*"
	if req.RouteBlocking {
		if union, err = normCapabilities("namespace_capabilities", req.NamespaceCapabilities); err != nil {
			return nil, err
		}
	}
	p := req.Partition
	breached := breachedOn(p, req.BreachedBudgets)
	args := []string{
		req.Worker.WorkerID, req.Worker.InstanceID, caps, strconv.Itoa(req.Max), ms(ttl), randomToken(8), union,
		kinds, strconv.Itoa(len(breached)),
	}
	for _, b := range breached {
		mode := plan.OnHardLimitBlock
		if b.OnHardLimit == plan.OnHardLimitFail {
			mode = plan.OnHardLimitFail
		}
		args = append(args, b.BudgetID, mode, b.Detail())
	}
	var admitted []string
	for _, a := range req.Admitted {
		ap, uuid, err := splitID(string(a.ExecutionID))
		if err != nil {
			return nil, err
		}
		if err := checkAdmitted(a); err != nil {
			return nil, err
		}
		if ap == p {
			admitted = append(admitted, uuid, strconv.Itoa(a.Attempt), strconv.Itoa(a.Resets), a.Token)
		}
	}
	args = append(append(append(args, strconv.Itoa(len(admitted)/4)), admitted...), req.Lanes...)
	keys := []string{s.k.anchor(p), s.k.leases(p), s.k.timeouts(p)}
	for _, l := range req.Lanes {
		keys = append(keys, s.k.lane(p, req.Worker.Namespace, l, indexEligible))
	}
	for _, l := range req.Lanes {
		keys = append(keys, s.k.lane(p, req.Worker.Namespace, l, indexBlocked))
	}
	items, err := s.single(ctx, call{fn: "ff_claim", partition: p, keys: keys, args: args}, "", "claim")
	if err != nil {
		return nil, err
	}
	if len(items) != 2 {
		return nil, fmt.Errorf("store: ff_claim: malformed reply of %d items", len(items))
	}
	if needs != nil {
		nv, _ := items[1].ToArray()
		var deferred []deferredNeed
		for _, it := range nv {
			v, err := it.ToArray()
			if err != nil || len(v) < 4 || len(v) > 5 {
				return nil, fmt.Errorf("store: ff_claim: malformed admission candidate: %v", err)
			}
			c := Candidate{ExecutionID: makeID(p, str(v[0])), Attempt: atoi(str(v[1])), Quotas: splitList(str(v[2])),
				Resets: atoi(str(v[3]))}
			if len(v) == 5 {
				deferred = append(deferred, deferredNeed{c: c, uuid: str(v[0]), stored: str(v[2]), input: []byte(str(v[4]))})
				continue
			}
			*needs = append(*needs, c)
		}
		if len(deferred) > 0 {
			// The claim's grants are written: an error here only leaves
			// these members for a later claim (fail closed).
			settled, err := s.settleQuotaKeys(ctx, p, deferred)
			if err != nil {
				s.log.WarnContext(ctx, "reading deferred quota keys failed; those members are not admitted", attrError, err)
			}
			*needs = append(*needs, settled...)
		}
	}
	gv, err := items[0].ToArray()
	if err != nil {
		return nil, fmt.Errorf("store: ff_claim: malformed grants: %w", err)
	}
	return parseGrants(p, req.Worker.Namespace, gv, "ff_claim")
}

// ClaimLost returns, on partition, the grants that the last claims of
// worker w's instance made and that it still holds under their leases:
// for a claim whose answer was lost on its way, they are delivered again
// instead of waiting for their leases to run out (and being charged as
// reclaims). A grant the worker did receive may be among them: it drops
// the leases it holds. Read-only.
func (s *Store) ClaimLost(ctx context.Context, partition int, w WorkerIdentity, max int) ([]Grant, error) {
	if partition < 0 || partition >= s.cfg.FlowPartitions {
		return nil, invalid("partition", "%d is outside 0..%d", partition, s.cfg.FlowPartitions-1)
	}
	if w.InstanceID == "" || max < 1 || max > MaxClaim {
		return nil, invalid("claim", "an instance id and a max in 1..%d are required", MaxClaim)
	}
	items, err := s.single(ctx, call{fn: "ff_claim_lost", partition: partition, keys: []string{s.k.anchor(partition)},
		args: []string{w.InstanceID, strconv.Itoa(max)}}, "", "claim")
	if err != nil {
		return nil, err
	}
	if len(items) != 1 {
		return nil, fmt.Errorf("store: ff_claim_lost: malformed reply of %d items", len(items))
	}
	gv, err := items[0].ToArray()
	if err != nil {
		return nil, fmt.Errorf("store: ff_claim_lost: malformed grants: %w", err)
	}
	return parseGrants(partition, w.Namespace, gv, "ff_claim_lost")
}

// grantFields is the length of a grant of ff_claim and ff_finish
// (grant_entry in lua/worker.lua); one that omits upstream results has one
// more field, the omitted upstreams.
const grantFields = 18

// parseGrants decodes the grants of ff_claim or ff_finish (partition p).
func parseGrants(p int, ns string, gv []valkey.ValkeyMessage, fn string) ([]Grant, error) {
	grants := make([]Grant, 0, len(gv))
	for _, it := range gv {
		v, err := it.ToArray()
		if err != nil || (len(v) != grantFields && len(v) != grantFields+1) {
			return nil, fmt.Errorf("store: %s: malformed grant of %d fields: %v", fn, len(v), err)
		}
		id := makeID(p, str(v[0]))
		g := Grant{
			Lease:           Lease{ExecutionID: id, ID: str(v[6]), Epoch: num(v[7])},
			Namespace:       ns,
			Lane:            str(v[1]),
			Kind:            str(v[2]),
			Priority:        int(num(v[3])),
			Attempt:         int(num(v[4])),
			AttemptType:     AttemptType(str(v[5])),
			LeaseExpiresAt:  msTime(num(v[8])),
			AttemptDeadline: msTime(num(v[9])),
			MaxAttempts:     int(num(v[10])),
			FlowID:          str(v[13]),
			FlowNode:        str(v[14]),
		}
		if p := str(v[11]); p != "" {
			g.Payload = []byte(p)
		}
		if t := str(v[12]); t != "" {
			// Into a local: &g.Tags would move every grant to the heap.
			var tags map[string]string
			json.Unmarshal([]byte(t), &tags)
			g.Tags = tags
		}
		ups, _ := v[15].ToArray()
		if len(ups) >= 2 {
			g.Upstreams = make(map[string][]byte, len(ups)/2)
		}
		for i := 0; i+1 < len(ups); i += 2 {
			g.Upstreams[str(ups[i])] = []byte(str(ups[i+1]))
		}
		g.Downstream = str(v[16]) == "1"
		errs, _ := v[17].ToArray()
		for i := 0; i+2 < len(errs); i += 3 {
			if g.UpstreamErrors == nil {
				g.UpstreamErrors = map[string]UpstreamError{}
			}
			g.UpstreamErrors[str(errs[i])] = UpstreamError{State: PublicState(str(errs[i+1])), Error: str(errs[i+2])}
		}
		if len(v) > grantFields {
			omitted, _ := v[grantFields].ToArray()
			g.UpstreamsOmitted = make(map[string]ExecutionID, len(omitted)/2)
			for i := 0; i+1 < len(omitted); i += 2 {
				g.UpstreamsOmitted[str(omitted[i])] = makeID(p, str(omitted[i+1]))
			}
		}
		grants = append(grants, g)
	}
	return grants, nil
}

// checkTaker validates what a claim and a hand-off share: the worker
// (filling in its namespace), its lanes, how many grants it takes and the
// lease it asks for. It returns the lease duration and the normalised
// capabilities; field names of errors start with prefix.
func checkTaker(w *WorkerIdentity, lanes []string, max int, lease time.Duration, prefix string) (time.Duration, string, error) {
	if err := w.validate(); err != nil {
		return 0, "", err
	}
	if len(lanes) == 0 {
		return 0, "", invalid(prefix+"lanes", "at least one lane is required")
	}
	for _, l := range lanes {
		if err := checkName(prefix+"lanes", l); err != nil {
			return 0, "", err
		}
	}
	if max < 1 || max > MaxClaim {
		return 0, "", invalid(prefix+"max", "%d is outside 1..%d", max, MaxClaim)
	}
	ttl, err := leaseTTL(lease)
	if err != nil {
		return 0, "", err
	}
	caps, err := normCapabilities(prefix+"capabilities", w.Capabilities)
	if err != nil {
		return 0, "", err
	}
	return ttl, caps, nil
}

// normKinds checks the kinds a worker has handlers for and returns them
// sorted, unique and comma-joined (empty: any kind).
func normKinds(field string, kinds []string) (string, error) {
	if len(kinds) > MaxKinds {
		return "", invalid(field, "%d kinds, at most %d", len(kinds), MaxKinds)
	}
	for _, k := range kinds {
		if err := checkToken(field, k, MaxKindBytes); err != nil {
			return "", err
		}
	}
	ks := slices.Clone(kinds)
	slices.Sort(ks)
	return strings.Join(slices.Compact(ks), ","), nil
}

func leaseTTL(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return LeaseTTLDefault, nil
	}
	if d < LeaseTTLMin || d > LeaseTTLMax {
		return 0, invalid("lease_ttl", "%s is outside %s..%s", d, LeaseTTLMin, LeaseTTLMax)
	}
	return d, nil
}

// batch groups items of many partitions into one call per partition.
type batch struct {
	calls []call
	index [][]int // index[c] = positions of call c's items in the input
	// items, when set, is how many items the batch gets: a call is made
	// with room for all of them (most batches go to one partition).
	items int
}

func (b *batch) add(p int, fn string, head []string, pos int, item ...string) {
	for i, c := range b.calls {
		if c.partition == p {
			b.calls[i].args = append(b.calls[i].args, item...)
			b.index[i] = append(b.index[i], pos)
			return
		}
	}
	n := max(b.items, 1)
	args := make([]string, 0, len(head)+n*len(item))
	b.calls = append(b.calls, call{fn: fn, partition: p, args: append(append(args, head...), item...)})
	b.index = append(b.index, append(make([]int, 0, n), pos))
}

// run sends the calls pipelined and hands each item reply, or the refusal
// of the item, to each.
func (s *Store) run(ctx context.Context, b *batch, each func(pos int, items []valkey.ValkeyMessage, ref *refusal)) error {
	if len(b.calls) == 0 {
		return nil
	}
	msgs, err := s.fcallMany(ctx, b.calls)
	if err != nil {
		return err
	}
	for c, msg := range msgs {
		items, ref, err := envelope(msg)
		if err != nil || ref != nil || len(items) != len(b.index[c]) {
			return fmt.Errorf("store: %s: malformed batch reply (%v, %v)", b.calls[c].fn, err, ref)
		}
		for j, it := range items {
			sub, ref, err := envelope(it)
			if err != nil {
				return fmt.Errorf("store: %s: %w", b.calls[c].fn, err)
			}
			each(b.index[c][j], sub, ref)
		}
	}
	return nil
}

// Renew extends many leases by ttl (0 = LeaseTTLDefault), one FCALL per
// partition, pipelined. results[i] belongs to leases[i]; err is for
// transport failures and an invalid ttl only. A lease found expired is
// expired on the spot (its execution requeued or failed) and reported as a
// *LeaseError.
func (s *Store) Renew(ctx context.Context, leases []Lease, ttl time.Duration) ([]RenewResult, error) {
	ttl, err := leaseTTL(ttl)
	if err != nil {
		return nil, err
	}
	if len(leases) > MaxBatch {
		return nil, invalid("leases", "%d leases, at most %d per call", len(leases), MaxBatch)
	}
	out := make([]RenewResult, len(leases))
	b := &batch{}
	for i, l := range leases {
		p, uuid, err := s.locate(l.ExecutionID)
		if err != nil {
			out[i].Err = err
			continue
		}
		b.add(p, "ff_renew", []string{ms(ttl)}, i, uuid, l.ID, strconv.FormatInt(l.Epoch, 10))
	}
	err = s.run(ctx, b, func(pos int, items []valkey.ValkeyMessage, ref *refusal) {
		if ref != nil {
			out[pos].Err = refusalError(ref, leases[pos].ExecutionID, "renew")
			return
		}
		out[pos].ExpiresAt = fromMs(str(items[0]))
	})
	return out, err
}

// Complete ends an attempt successfully with result.
func (s *Store) Complete(ctx context.Context, lease Lease, result []byte) error {
	r, err := s.FinishMany(ctx, []Finish{{Lease: lease, Result: result}})
	if err != nil {
		return err
	}
	return r[0].Err
}

// Fail ends an attempt with an error. A retryable failure with attempts
// left goes to the delayed index (or straight to eligible when the backoff
// is zero); otherwise the execution fails.
func (s *Store) Fail(ctx context.Context, lease Lease, msg string, retryable bool) (FinishResult, error) {
	r, err := s.FinishMany(ctx, []Finish{{Lease: lease, Failed: true, Error: msg, Retryable: retryable}})
	if err != nil {
		return FinishResult{}, err
	}
	return r[0], r[0].Err
}

// FinishMany reports the end of many attempts, one FCALL per partition,
// pipelined. results[i] belongs to items[i]; err is for a bad request and
// for a failure of every call. When only some partitions' calls fail
// (transport, server error), their items carry the error and the others
// stand. A lease found expired is expired on the spot and reported as a
// *LeaseError.
func (s *Store) FinishMany(ctx context.Context, items []Finish) ([]FinishResult, error) {
	res, _, err := s.FinishHandoff(ctx, items, nil)
	return res, err
}

// FinishHandoff is FinishMany with a hand-off (nil: none): the grants it
// made to h.Worker, at most h.Max in all, are returned with the results.
// The grants are live leases: the caller must deliver them to the worker.
func (s *Store) FinishHandoff(ctx context.Context, items []Finish, h *Handoff) ([]FinishResult, []Grant, error) {
	if len(items) > MaxBatch {
		return nil, nil, invalid("items", "%d items, at most %d per call", len(items), MaxBatch)
	}
	if h != nil {
		hc := *h // validation fills in defaults
		h = &hc
	}
	head, err := s.handoffArgs(h)
	if err != nil {
		return nil, nil, err
	}
	out := make([]FinishResult, len(items))
	b := &batch{items: len(items)}
	for i, f := range items {
		p, uuid, err := s.locate(f.Lease.ExecutionID)
		if err != nil {
			out[i].Err = err
			continue
		}
		kind, data := "ok", string(f.Result)
		if f.Failed {
			kind, data = "fail", clip(f.Error, MaxErrorBytes)
			if f.Retryable {
				kind = "retry"
			}
		} else if err := checkPayload("result", f.Result); err != nil {
			out[i].Err = err
			continue
		}
		b.add(p, "ff_finish", head, i, uuid, f.Lease.ID, strconv.FormatInt(f.Lease.Epoch, 10), kind, data)
	}
	if len(b.calls) == 0 {
		return out, nil, nil
	}
	if h != nil {
		// Spread the grants over the calls: each may make as many as it
		// has items, and all together at most h.Max.
		left := h.Max
		for i := range b.calls {
			n := min(len(b.index[i]), left)
			left -= n
			b.calls[i].args[1] = strconv.Itoa(n)
		}
	}
	// A call that failed fails its own items only: the other partitions'
	// finishes stand, and their outcomes, hand-off grants and run ends must
	// reach the caller (a worker retrying the whole batch would find them
	// finished, and the grants would wait for their leases to expire).
	msgs, errs := s.fcallEach(ctx, b.calls)
	if !slices.ContainsFunc(errs, func(err error) bool { return err == nil }) {
		return nil, nil, errs[0] // nothing went through: the caller may retry it all
	}
	// Whatever happens below, the runs read as ended are announced.
	defer s.announceRunEnds(ctx, out)
	var grants []Grant
	for c, msg := range msgs {
		if errs[c] != nil {
			for _, pos := range b.index[c] {
				out[pos].Err = errs[c]
			}
			continue
		}
		parts, ref, err := envelope(msg)
		if err != nil || ref != nil || len(parts) != 2 {
			return nil, nil, fmt.Errorf("store: ff_finish: malformed reply (%v, %v)", err, ref)
		}
		results, err := parts[0].ToArray()
		if err != nil || len(results) != len(b.index[c]) {
			return nil, nil, fmt.Errorf("store: ff_finish: malformed results (%v)", err)
		}
		for j, it := range results {
			sub, ref, err := envelope(it)
			if err != nil {
				return nil, nil, fmt.Errorf("store: ff_finish: %w", err)
			}
			pos := b.index[c][j]
			if ref != nil {
				out[pos].Err = refusalError(ref, items[pos].Lease.ExecutionID, "finish")
				continue
			}
			out[pos].State = PublicState(str(sub[0]))
			out[pos].RetryAt = msTime(num(sub[1]))
			if len(sub) == 6 {
				id := RunID(makeID(b.calls[c].partition, str(sub[2])))
				if out[pos].RunEnded, err = cleanOutcome(id, sub[3:]); err != nil {
					return nil, nil, fmt.Errorf("store: ff_finish: %w", err)
				}
			}
		}
		gv, err := parts[1].ToArray()
		if err != nil {
			return nil, nil, fmt.Errorf("store: ff_finish: malformed grants: %w", err)
		}
		if len(gv) > 0 {
			g, err := parseGrants(b.calls[c].partition, h.Worker.Namespace, gv, "ff_finish")
			if err != nil {
				return nil, nil, err
			}
			grants = append(grants, g...)
		}
	}
	return out, grants, nil
}

// announceRunEnds hands the runs the finishes ended cleanly to
// Config.RunEnded, then publishes their end notices (ff_finish leaves
// those to the caller), in the background (Wait waits for them): the
// worker's answer does not wait for them, and a lost notice only delays
// other processes' waiters until their periodic re-read.
func (s *Store) announceRunEnds(ctx context.Context, results []FinishResult) {
	var cmds valkey.Commands
	for _, r := range results {
		if r.RunEnded == nil {
			continue
		}
		if s.cfg.RunEnded != nil {
			s.cfg.RunEnded(r.RunEnded)
		}
		cmds = append(cmds, s.c.B().Publish().Channel(s.RunsChannel()).Message(string(r.RunEnded.ID)+":"+string(RunSucceeded)).Build())
	}
	if len(cmds) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	s.notices.Go(func() {
		for _, resp := range s.c.DoMulti(ctx, cmds...) {
			if err := resp.Error(); err != nil && !errors.Is(err, valkey.ErrClosing) {
				s.cfg.Logger.WarnContext(ctx, "store: publish run end", slog.Any("error", err))
			}
		}
	})
}

// handoffArgs returns the head of ff_finish's arguments: the jitter seed
// and the hand-off (max 0 when h is nil), after checking h.
func (s *Store) handoffArgs(h *Handoff) ([]string, error) {
	seed := strconv.Itoa(rand.IntN(1_000_000_000))
	if h == nil {
		return []string{seed, "0", "", "", "", "", "", "0", "", ""}, nil
	}
	ttl, caps, err := checkTaker(&h.Worker, h.Lanes, h.Max, h.LeaseTTL, "handoff.")
	if err != nil {
		return nil, err
	}
	kinds, err := normKinds("handoff.kinds", h.Kinds)
	if err != nil {
		return nil, err
	}
	return []string{seed, strconv.Itoa(h.Max), h.Worker.WorkerID, h.Worker.InstanceID, caps,
		h.Worker.Namespace, strings.Join(h.Lanes, ","), ms(ttl), randomToken(8), kinds}, nil
}

// EligibleCounts returns, per partition, the number of eligible executions
// of the namespace's lanes: one pipelined round of ZCARDs, so the scheduler
// can skip empty partitions.
func (s *Store) EligibleCounts(ctx context.Context, namespace string, lanes []string) ([]int64, error) {
	if err := checkName("namespace", namespace); err != nil {
		return nil, err
	}
	for _, l := range lanes {
		if err := checkName("lanes", l); err != nil {
			return nil, err
		}
	}
	counts := make([]int64, s.cfg.FlowPartitions)
	if len(lanes) == 0 {
		return counts, nil
	}
	cmds := make(valkey.Commands, 0, len(counts)*len(lanes))
	for p := range counts {
		for _, l := range lanes {
			cmds = append(cmds, s.c.B().Zcard().Key(s.k.lane(p, namespace, l, indexEligible)).Build())
		}
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("store: count eligible: %w", err)
		}
		counts[i/len(lanes)] += n
	}
	return counts, nil
}
