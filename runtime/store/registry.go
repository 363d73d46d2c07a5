package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// WorkerTTLDefault is how long a worker counts as connected after its last
// heartbeat when Heartbeat is given no ttl.
const WorkerTTLDefault = 30 * time.Second

// WorkerInfo is a connected worker instance.
type WorkerInfo struct {
	Namespace    string    `json:"namespace"`
	WorkerID     string    `json:"worker_id"`
	InstanceID   string    `json:"worker_instance_id"`
	Lanes        []string  `json:"lanes,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Kinds        []string  `json:"kinds,omitempty"` // none: not said (any kind)
	ConnectedAt  time.Time `json:"connected_at"`
	SeenAt       time.Time `json:"seen_at"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// Registration is what a worker instance says of itself when it connects
// and at each heartbeat.
type Registration struct {
	Worker WorkerIdentity
	Lanes  []string
	// Kinds are the kinds it has handlers for (at most MaxKinds); none:
	// not said, any kind. Wait hints use them.
	Kinds []string
	TTL   time.Duration // listed this long; 0 = WorkerTTLDefault
}

// Heartbeat registers or refreshes a worker instance for r.TTL. It reports
// whether the instance was new (or had expired). Capabilities are
// validated like execution requirements, kinds like a claim's.
func (s *Store) Heartbeat(ctx context.Context, r Registration) (registered bool, err error) {
	w, lanes, ttl := r.Worker, r.Lanes, r.TTL
	if err := w.validate(); err != nil {
		return false, err
	}
	for _, l := range lanes {
		if err := checkName("lanes", l); err != nil {
			return false, err
		}
	}
	caps, err := normCapabilities("capabilities", w.Capabilities)
	if err != nil {
		return false, err
	}
	kinds, err := normKinds("kinds", r.Kinds)
	if err != nil {
		return false, err
	}
	if ttl == 0 {
		ttl = WorkerTTLDefault
	}
	if ttl < LeaseTTLMin || ttl > LeaseTTLMax {
		return false, invalid("ttl", "%s is outside %s..%s", ttl, LeaseTTLMin, LeaseTTLMax)
	}
	c := call{
		fn:   "ff_worker_heartbeat",
		keys: []string{s.k.workers(w.Namespace), s.k.worker(w.Namespace, w.InstanceID)},
		args: []string{w.Namespace, w.InstanceID, w.WorkerID, strings.Join(lanes, ","), caps, ms(ttl), kinds},
	}
	items, err := s.single(ctx, c, "", "heartbeat")
	if err != nil {
		return false, err
	}
	// After the registry, never before: PruneNamespaces relies on it.
	if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.k.namespaces()).Member(w.Namespace).Build()).Error(); err != nil {
		return false, fmt.Errorf("store: register namespace: %w", err)
	}
	return str(items[0]) == "registered", nil
}

// serverTime returns the server's clock.
func (s *Store) serverTime(ctx context.Context) (time.Time, error) {
	v, err := s.c.Do(ctx, s.c.B().Time().Build()).AsStrSlice()
	if err != nil || len(v) != 2 {
		return time.Time{}, fmt.Errorf("store: TIME: %v", err)
	}
	sec, _ := strconv.ParseInt(v[0], 10, 64)
	usec, _ := strconv.ParseInt(v[1], 10, 64)
	return time.Unix(sec, usec*1000), nil
}

// liveWorkers returns the ids of the namespace's connected instances (by
// the server's clock), sorted.
func (s *Store) liveWorkers(ctx context.Context, namespace string) ([]string, error) {
	if err := checkName("namespace", namespace); err != nil {
		return nil, err
	}
	now, err := s.serverTime(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := s.c.Do(ctx, s.c.B().Zrangebyscore().Key(s.k.workers(namespace)).
		Min("("+strconv.FormatInt(now.UnixMilli(), 10)).Max("+inf").Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("store: list workers: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// Workers returns the connected worker instances of a namespace, by
// instance id.
func (s *Store) Workers(ctx context.Context, namespace string) ([]WorkerInfo, error) {
	ids, err := s.liveWorkers(ctx, namespace)
	if err != nil {
		return nil, err
	}
	cmds := make(valkey.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = s.c.B().Hgetall().Key(s.k.worker(namespace, id)).Build()
	}
	var out []WorkerInfo
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		f, err := r.AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("store: read worker: %w", err)
		}
		if len(f) == 0 {
			continue // expired meanwhile
		}
		out = append(out, WorkerInfo{
			Namespace: namespace, WorkerID: f["worker_id"], InstanceID: ids[i],
			Lanes: splitList(f["lanes"]), Capabilities: splitList(f["caps"]), Kinds: splitList(f["kinds"]),
			ConnectedAt: fromMs(f["connected_at"]), SeenAt: fromMs(f["seen_at"]), ExpiresAt: fromMs(f["expires_at"]),
		})
	}
	return out, nil
}

// WorkerProfile is what some of a namespace's connected instances take,
// alike: the instances of one worker binary, started the same way, share
// one.
type WorkerProfile struct {
	Lanes        []string
	Capabilities []string // sorted
	Kinds        []string // sorted; none: not said (any kind)
	Instances    int      // connected instances with this profile
}

// WorkerProfiles returns the distinct profiles of the namespace's
// connected instances (what wait hints need), ordered by capabilities,
// then lanes, then kinds. It reads only the lanes, capabilities and kinds
// of each instance, and splits each distinct list once: a fleet of one
// binary costs its instances' reads and one profile.
func (s *Store) WorkerProfiles(ctx context.Context, namespace string) ([]WorkerProfile, error) {
	ids, err := s.liveWorkers(ctx, namespace)
	if err != nil {
		return nil, err
	}
	cmds := make(valkey.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = s.c.B().Hmget().Key(s.k.worker(namespace, id)).Field("lanes", "caps", "kinds").Build()
	}
	type raw struct{ caps, lanes, kinds string }
	count := map[raw]int{}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		f, err := r.ToArray()
		if err != nil {
			return nil, fmt.Errorf("store: read worker: %w", err)
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("store: read worker: %d fields, want 3", len(f))
		}
		var v [3]string
		expired := false
		for j := range f {
			if v[j], err = f[j].ToString(); valkey.IsValkeyNil(err) {
				expired = true // every field is written at each heartbeat
			} else if err != nil {
				return nil, fmt.Errorf("store: read worker: %w", err)
			}
		}
		if !expired {
			count[raw{lanes: v[0], caps: v[1], kinds: v[2]}]++
		}
	}
	keys := slices.SortedFunc(maps.Keys(count), func(a, b raw) int {
		return cmp.Or(cmp.Compare(a.caps, b.caps), cmp.Compare(a.lanes, b.lanes), cmp.Compare(a.kinds, b.kinds))
	})
	out := make([]WorkerProfile, len(keys))
	for i, k := range keys {
		out[i] = WorkerProfile{Lanes: splitList(k.lanes), Capabilities: splitList(k.caps), Kinds: splitList(k.kinds), Instances: count[k]}
	}
	return out, nil
}

// CapabilityUnion returns the sorted union of the capabilities of the
// namespace's connected workers (for ClaimRequest.NamespaceCapabilities and
// UnblockRoute). It reads only each instance's capabilities, not its
// record (whose kinds may run to MaxKinds).
func (s *Store) CapabilityUnion(ctx context.Context, namespace string) ([]string, error) {
	ids, err := s.liveWorkers(ctx, namespace)
	if err != nil {
		return nil, err
	}
	cmds := make(valkey.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = s.c.B().Hget().Key(s.k.worker(namespace, id)).Field("caps").Build()
	}
	sets := map[string]bool{} // distinct capability lists, as stored
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		caps, err := r.ToString()
		if valkey.IsValkeyNil(err) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("store: read worker: %w", err)
		}
		sets[caps] = true
	}
	var union []string
	for caps := range sets {
		union = append(union, splitList(caps)...)
	}
	slices.Sort(union)
	return slices.Compact(union), nil
}

// Namespaces returns the namespaces with connected workers, and those
// whose workers all left since PruneNamespaces (the retention scanner)
// last ran.
func (s *Store) Namespaces(ctx context.Context) ([]string, error) {
	ns, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.k.namespaces()).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	slices.Sort(ns)
	return ns, nil
}

// PruneNamespaces drops from the namespace set (what Namespaces returns,
// and the unblock scanner walks every second) the namespaces without a
// connected worker, and their worker registries: each namespace's expired
// instances leave its {w:<ns>}:workers ZSET (ff_worker_sweep), which goes
// with its last entry. It returns how many namespaces it dropped. The
// retention scanner calls it once per tick.
//
// The set and a namespace's registry are on different hash slots in a
// cluster, so this cannot be one atomic call. Its steps come in an order
// that is safe against a heartbeat of the namespace coming meanwhile
// (Heartbeat writes the registry, then adds the namespace to the set):
//
//  1. every registry is swept; a namespace with a live instance is kept;
//  2. the others leave the set (SREM);
//  3. their registries are looked at again (EXISTS), and the namespaces
//     whose registry exists (a heartbeat came since step 1) are added back.
//
// A heartbeat that added its namespace before step 2 wrote its registry
// before step 2 too, so step 3 sees it; one that adds it after step 2
// puts it back itself. Either way a namespace with a connected worker
// ends up in the set; it is missing at most between steps 2 and 3 (an
// unblock tick then passes it over once), or, when step 3 fails, until
// its next heartbeat.
func (s *Store) PruneNamespaces(ctx context.Context) (int, error) {
	names, err := s.Namespaces(ctx)
	if err != nil || len(names) == 0 {
		return 0, err
	}
	calls := make([]call, len(names))
	for i, ns := range names {
		calls[i] = call{fn: "ff_worker_sweep", keys: []string{s.k.workers(ns)}}
	}
	replies, err := s.fcallMany(ctx, calls)
	if err != nil {
		return 0, err
	}
	var idle []string
	for i, r := range replies {
		items, ref, err := envelope(r)
		if err == nil && (ref != nil || len(items) < 1) {
			err = fmt.Errorf("malformed reply")
		}
		if err != nil {
			return 0, fmt.Errorf("store: ff_worker_sweep: %w", err)
		}
		if live, err := items[0].AsInt64(); err == nil && live == 0 {
			idle = append(idle, names[i])
		}
	}
	if len(idle) == 0 {
		return 0, nil
	}
	if err := s.c.Do(ctx, s.c.B().Srem().Key(s.k.namespaces()).Member(idle...).Build()).Error(); err != nil {
		return 0, fmt.Errorf("store: drop namespaces: %w", err)
	}
	cmds := make(valkey.Commands, len(idle))
	for i, ns := range idle {
		cmds[i] = s.c.B().Exists().Key(s.k.workers(ns)).Build()
	}
	var back []string
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil || n > 0 {
			back = append(back, idle[i]) // a heartbeat came (or we cannot tell): keep it
		}
	}
	if len(back) > 0 {
		if err := s.c.Do(ctx, s.c.B().Sadd().Key(s.k.namespaces()).Member(back...).Build()).Error(); err != nil {
			return 0, fmt.Errorf("store: keep namespaces: %w", err)
		}
	}
	return len(idle) - len(back), nil
}

// UnblockRoute looks at up to limit executions of a partition and
// namespace that wait for a capable worker, and makes those that
// capabilities (the namespace's union, from CapabilityUnion) now cover
// eligible again. Each lane of the namespace gets a share of limit and is
// read from where cursor says the last call left off (nil: from the head;
// a worker's connect passes nil), and cursor records where the next call
// starts: calls sharing a cursor, as the unblock scanner's do, go through
// a backlog nobody can run a share at a time, in laps that end where the
// lane's index ended when they started (see UnblockCursor), so even a
// backlog growing at its tail never hides one a worker now covers for
// more than a lap. The ones it looks at that stay parked keep their
// place and score. Executions of other namespaces are never touched. More
// is set only when something was promoted and a lane's read filled its
// share.
func (s *Store) UnblockRoute(ctx context.Context, partition int, namespace string, capabilities []string, limit int, cursor *UnblockCursor) (ScanResult, error) {
	if err := checkName("namespace", namespace); err != nil {
		return ScanResult{}, err
	}
	union, err := normCapabilities("capabilities", capabilities)
	if err != nil {
		return ScanResult{}, err
	}
	if partition < 0 || partition >= s.cfg.FlowPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", partition, s.cfg.FlowPartitions-1)
	}
	if limit < 1 || limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", limit, ScanLimitMax)
	}
	g := routeGroup{partition, namespace}
	args := []string{strconv.Itoa(limit), namespace, union}
	for lane, l := range cursor.routeLaps(g) {
		args = append(args, lane, strconv.FormatInt(l.off, 10), strconv.FormatInt(l.end, 10))
	}
	items, err := s.single(ctx, call{fn: "ff_unblock_route", partition: partition, args: args}, "", "ff_unblock_route")
	if err != nil {
		return ScanResult{}, err
	}
	if len(items) < 3 {
		return ScanResult{}, fmt.Errorf("store: ff_unblock_route: malformed reply: %d items", len(items))
	}
	n, _ := items[0].AsInt64()
	more, _ := items[1].AsInt64()
	resume, err := items[2].ToArray()
	if err != nil {
		return ScanResult{}, fmt.Errorf("store: ff_unblock_route: malformed lane offsets: %w", err)
	}
	for i := 0; i+2 < len(resume); i += 3 {
		cursor.setRouteLap(g, str(resume[i]), lap{off: atoi64(str(resume[i+1])), end: atoi64(str(resume[i+2]))})
	}
	return ScanResult{Processed: int(n), More: more == 1}, nil
}
