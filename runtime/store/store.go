package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/valkey-io/valkey-go"
)

// Config configures Open.
type Config struct {
	Client           valkey.Client // required; owned by the caller
	FlowPartitions   int           // 0 = FlowPartitionsDefault
	BudgetPartitions int           // 0 = BudgetPartitionsDefault
	QuotaPartitions  int           // 0 = QuotaPartitionsDefault
	// KeyPrefix is prepended to every key and to the wake-up channel, so
	// several deployments (or tests) can share one server. It must not
	// contain braces.
	KeyPrefix      string
	IdempotencyTTL time.Duration // 0 = IdempotencyTTLDefault
	// PauseRecheck bounds how long an execution blocked by a quota (paused,
	// at its rate or at its concurrency) waits before it is checked again:
	// a pause ended early (ResumeQuota), a rate or cap raised, is noticed
	// within it. 0 = PauseRecheckDefault.
	PauseRecheck time.Duration
	Logger       *slog.Logger // nil = discard
	// RunEnded, when set, is called with each run that a finish of this
	// store ended with a clean success (FinishResult.RunEnded), before
	// the store publishes the run's end notice on RunsChannel: a process
	// answers its own waiters from the outcome, and no notice can wake
	// them first and send them to read the run again.
	RunEnded func(*Run)
	// LibraryReloaded, when set, is called after the store loaded its
	// library again because the server did not have it: the server
	// restarted without its data (or failed over to one that lacked it),
	// and what was written at start (the declared budgets, quotas and
	// schedules) may be gone too. It must not block. The store itself
	// stores its partition counts again first.
	LibraryReloaded func()
}

func (c Config) withDefaults() Config {
	c.FlowPartitions = cmp.Or(c.FlowPartitions, FlowPartitionsDefault)
	c.BudgetPartitions = cmp.Or(c.BudgetPartitions, BudgetPartitionsDefault)
	c.QuotaPartitions = cmp.Or(c.QuotaPartitions, QuotaPartitionsDefault)
	c.IdempotencyTTL = cmp.Or(c.IdempotencyTTL, IdempotencyTTLDefault)
	c.PauseRecheck = cmp.Or(c.PauseRecheck, PauseRecheckDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	if c.Client == nil {
		return errors.New("store: Config.Client is required")
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"FlowPartitions", c.FlowPartitions}, {"BudgetPartitions", c.BudgetPartitions}, {"QuotaPartitions", c.QuotaPartitions}} {
		if f.n < 1 || f.n > PartitionsMax {
			return fmt.Errorf("store: Config.%s = %d, want 1..%d", f.name, f.n, PartitionsMax)
		}
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		return fmt.Errorf("store: Config.KeyPrefix %q must not contain braces", c.KeyPrefix)
	}
	if c.IdempotencyTTL < time.Second {
		return fmt.Errorf("store: Config.IdempotencyTTL = %s, want at least 1s", c.IdempotencyTTL)
	}
	if c.PauseRecheck < time.Millisecond {
		return fmt.Errorf("store: Config.PauseRecheck = %s, want at least 1ms", c.PauseRecheck)
	}
	return nil
}

// Store is the typed access to FlowFabric state on Valkey. It is safe for
// concurrent use.
type Store struct {
	cfg  Config
	c    valkey.Client
	k    keys
	log  *slog.Logger
	load sync.Mutex // serialises library reloads

	place placement // partitions of new work without an idempotency key

	notices sync.WaitGroup // run-end notices being published (announceRunEnds)

	prepared preparedFlows // what staging derived from the plans staged lately

	warned sync.Map // "budget <id>" or "quota <id>" -> when staging last warned it differs (warnDiffers)

	backfill struct { // the background backfill of the budget and quota indexes (startLimitsBackfill)
		cancel context.CancelFunc
		done   sync.WaitGroup
	}

	// replayStep, set by tests only, is the step of ff_replay_run (its
	// REPLAY_STEP when 0): small steps decide and apply small runs'
	// replays by steps.
	replayStep int

	// hook, set by tests only, runs at points of staging a run:
	// "resources" before budgets and quotas are created for a run (id: the
	// run's id, the first run's for a repeat of its idempotency key),
	// "stage" right before the call that makes a run visible (id: its
	// uuid; after the idempotency key was read, and after a large run's
	// chunks were written), "chunk" after each chunk of a large run is
	// written (id: its uuid), "due" between DueSchedules' read of the due
	// schedules and of their records (id: their names).
	hook func(point, id string)
}

// Wait waits until the run-end notices the store publishes in the
// background have been sent, and stops the backfill of the budget and
// quota indexes (BackfillLimitIndexes) if it runs; call it before closing
// the client.
func (s *Store) Wait() {
	s.stopLimitsBackfill()
	s.notices.Wait()
}

// PlacementStreak is how many consecutive placements without an
// idempotency key (flow runs staged, standalone create calls: a batched
// create is one placement) one Store puts on the same flow partition
// before it picks another at random. Streaks keep the work in flight on
// few partitions, so that a worker's claim and a batch of completions
// touch few partitions (each touched partition is one FCALL, and the
// scheduler claims partition by partition); over time every partition
// gets its share, and several ffrun processes have streaks of their own.
const PlacementStreak = 64

// placement is the current streak.
type placement struct {
	mu   sync.Mutex
	p    int
	left int
}

// streakPartition returns the partition of a new run or standalone create
// call without an idempotency key (see PlacementStreak).
func (s *Store) streakPartition() int {
	s.place.mu.Lock()
	defer s.place.mu.Unlock()
	if s.place.left <= 0 {
		s.place.p, s.place.left = mathrand.IntN(s.cfg.FlowPartitions), PlacementStreak
	}
	s.place.left--
	return s.place.p
}

// Open checks the server version, stores or checks the partition counts,
// loads this version of the Functions library where it is missing and
// records its use (KeepLibrary). On a deployment created by a release
// without budget and quota indexes it starts their backfill in the
// background (BackfillLimitIndexes; Wait stops it).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, c: cfg.Client, k: newKeys(cfg.KeyPrefix, cfg.FlowPartitions), log: cfg.Logger}
	server, err := s.checkServers(ctx)
	if err != nil {
		return nil, err
	}
	// No partition counts yet: a new deployment, without budgets or quotas
	// older than their indexes.
	known, err := s.c.Do(ctx, s.c.B().Hexists().Key(s.k.config()).Field("partitions").Build()).AsBool()
	if err != nil {
		return nil, fmt.Errorf("store: read partition counts: %w", err)
	}
	if err := s.checkPartitions(ctx); err != nil {
		return nil, err
	}
	if err := s.ensureLibrary(ctx, false); err != nil {
		return nil, err
	}
	if _, err := s.KeepLibrary(ctx); err != nil {
		return nil, err
	}
	if err := s.startLimitsBackfill(ctx, !known); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "store opened", attrServer, server, attrLibrary, lua.Library(),
		attrFlowPartitions, cfg.FlowPartitions)
	return s, nil
}

// checkServerVersion accepts Valkey 7.2+ and Redis 7.0+ and returns a
// description of the server.
func checkServerVersion(info string) (string, error) {
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	name, ver, min := "redis", fields["redis_version"], [2]int{7, 0}
	if v, ok := fields["valkey_version"]; ok {
		name, ver, min = "valkey", v, [2]int{7, 2}
	} else if fields["server_name"] == "valkey" {
		name, min = "valkey", [2]int{7, 2}
	}
	parts := strings.SplitN(ver, ".", 3)
	major, err1 := strconv.Atoi(parts[0])
	minor := 0
	var err2 error
	if len(parts) > 1 {
		minor, err2 = strconv.Atoi(parts[1])
	}
	if ver == "" || err1 != nil || err2 != nil {
		return "", fmt.Errorf("%w: cannot read the server version from INFO (got %q)", ErrUnsupportedServer, ver)
	}
	desc := name + " " + ver
	if major < min[0] || major == min[0] && minor < min[1] {
		return "", fmt.Errorf("%w: %s; FlowFabric needs Valkey 7.2+ or Redis 7.0+ (Functions)", ErrUnsupportedServer, desc)
	}
	return desc, nil
}

// partitionsValue is the stored form of the partition counts.
func (s *Store) partitionsValue() string {
	return fmt.Sprintf("flow=%d,budget=%d,quota=%d", s.cfg.FlowPartitions, s.cfg.BudgetPartitions, s.cfg.QuotaPartitions)
}

// checkPartitions stores the partition counts at first start and refuses
// other counts later. HSETNX makes concurrent first starts agree.
func (s *Store) checkPartitions(ctx context.Context) error {
	want := s.partitionsValue()
	key := s.k.config()
	if err := s.c.Do(ctx, s.c.B().Hsetnx().Key(key).Field("partitions").Value(want).Build()).Error(); err != nil {
		return fmt.Errorf("store: store partition counts: %w", err)
	}
	got, err := s.c.Do(ctx, s.c.B().Hget().Key(key).Field("partitions").Build()).ToString()
	if err != nil {
		return fmt.Errorf("store: read partition counts: %w", err)
	}
	if got != want {
		return fmt.Errorf("%w: the server at key %s holds %s but this process is configured with %s; partition counts are fixed for the life of a deployment: start with the stored counts, or use a new server or key prefix",
			ErrPartitionMismatch, key, got, want)
	}
	return nil
}

// checkServers checks the version of the server, or of every primary of a
// cluster that answers (INFO is keyless: a cluster client would send it
// to any node, a replica that went away included), and returns the
// description of the first.
func (s *Store) checkServers(ctx context.Context) (string, error) {
	nodes, err := s.libraryNodes(ctx)
	if err != nil {
		return "", err
	}
	var first string
	for _, n := range nodes {
		info, err := n.c.Do(ctx, n.c.B().Info().Section("server").Build()).ToString()
		if err != nil {
			return "", fmt.Errorf("store: INFO server%s: %w", n.desc, err)
		}
		server, err := checkServerVersion(info)
		if err != nil {
			return "", err
		}
		if first == "" {
			first = server
		}
	}
	return first, nil
}

func isFunctionNotFound(err error) bool {
	var ve *valkey.ValkeyError
	return errors.As(err, &ve) && strings.Contains(strings.ToLower(ve.Error()), "function not found")
}

// call is one FCALL of a partition function. KEYS[1] is always the
// partition's anchor; keys holds the keys after it.
type call struct {
	fn        string
	partition int
	keys      []string // nil: only the anchor
	args      []string
}

func (s *Store) build(c call) valkey.Completed {
	keys := c.keys
	if keys == nil {
		keys = []string{s.k.anchor(c.partition)}
	}
	return s.c.B().Fcall().Function(lua.Function(c.fn)).Numkeys(int64(len(keys))).Key(keys...).Arg(c.args...).Build()
}

// fcall runs one call, reloading the library and retrying once when the
// server does not know the function (a restarted or failed-over server).
func (s *Store) fcall(ctx context.Context, c call) (valkey.ValkeyMessage, error) {
	resp := s.c.Do(ctx, s.build(c))
	if err := resp.Error(); err != nil && isFunctionNotFound(err) {
		s.log.WarnContext(ctx, "functions library missing; reloading", attrFunction, c.fn)
		if err := s.reloadLibrary(ctx); err != nil {
			return valkey.ValkeyMessage{}, err
		}
		resp = s.c.Do(ctx, s.build(c))
	}
	msg, err := resp.ToMessage()
	if err != nil {
		return msg, fmt.Errorf("store: %s: %w", c.fn, err)
	}
	return msg, nil
}

// fcallMany pipelines calls (one round trip), with the same reload rule,
// and returns their replies, or the first error of any of them.
func (s *Store) fcallMany(ctx context.Context, calls []call) ([]valkey.ValkeyMessage, error) {
	out, errs := s.fcallEach(ctx, calls)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fcallEach sends calls pipelined and returns each call's reply or error:
// a call that failed (a transport error, a Lua error) does not hide the
// replies of the others, whose effects stand. A missing library is loaded
// again and the calls that found it missing are sent once more.
func (s *Store) fcallEach(ctx context.Context, calls []call) ([]valkey.ValkeyMessage, []error) {
	cmds := make(valkey.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = s.build(c)
	}
	resps := s.c.DoMulti(ctx, cmds...)
	out := make([]valkey.ValkeyMessage, len(calls))
	errs := make([]error, len(calls))
	var retry []int
	for i, r := range resps {
		if err := r.Error(); err != nil && isFunctionNotFound(err) {
			retry = append(retry, i)
			continue
		}
		msg, err := r.ToMessage()
		if err != nil {
			errs[i] = fmt.Errorf("store: %s: %w", calls[i].fn, err)
			continue
		}
		out[i] = msg
	}
	if len(retry) > 0 {
		s.log.WarnContext(ctx, "functions library missing; reloading", attrFunction, calls[retry[0]].fn)
		if err := s.reloadLibrary(ctx); err != nil {
			for _, i := range retry {
				errs[i] = err
			}
			return out, errs
		}
		for _, i := range retry {
			msg, err := s.c.Do(ctx, s.build(calls[i])).ToMessage()
			if err != nil {
				errs[i] = fmt.Errorf("store: %s: %w", calls[i].fn, err)
				continue
			}
			out[i] = msg
		}
	}
	return out, errs
}

// refusal is a {0, code, detail...} reply.
type refusal struct {
	code   string
	detail []string
}

// envelope splits a reply into its success items or a refusal.
func envelope(msg valkey.ValkeyMessage) ([]valkey.ValkeyMessage, *refusal, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) == 0 {
		return nil, nil, fmt.Errorf("store: malformed reply: %v", err)
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return nil, nil, fmt.Errorf("store: malformed reply status: %w", err)
	}
	if status == 1 {
		return arr[1:], nil, nil
	}
	r := &refusal{}
	for i, m := range arr[1:] {
		v, _ := m.ToString()
		if i == 0 {
			r.code = v
		} else {
			r.detail = append(r.detail, v)
		}
	}
	return nil, r, nil
}

// stagingExpired is the error of a run whose staging retention dropped.
func stagingExpired(id ExecutionID) error {
	return fmt.Errorf("%w: the staging of run %s took longer than %s and was dropped; stage it again", ErrStagingExpired, id, StagingTTL)
}

// refusalError is the one mapping of Lua refusal codes to typed errors.
func refusalError(r *refusal, id ExecutionID, op string) error {
	d := func(i int) string {
		if i < len(r.detail) {
			return r.detail[i]
		}
		return ""
	}
	switch r.code {
	case "not_found":
		return fmt.Errorf("%w: execution %s", ErrNotFound, id)
	case "invalid":
		return &ValidationError{Field: d(0), Msg: d(1)}
	case "stale_lease":
		return &LeaseError{ExecutionID: id, Reason: d(0), State: PublicState(d(1))}
	case "wrong_state":
		return &StateError{ExecutionID: id, Op: op, State: PublicState(d(0)), Reason: d(1)}
	case "staging_expired":
		return stagingExpired(id)
	case "run_exists":
		return fmt.Errorf("%w: run %s is already staged; its members cannot be written again", ErrWrongState, id)
	case "idempotency_conflict": // the key and the run's partition are the caller's to fill in
		return &IdempotencyError{Flow: d(0), RunID: RunID(d(1))}
	}
	return fmt.Errorf("store: %s %s: unknown refusal %q %v", op, id, r.code, r.detail)
}

// single runs a call whose reply is one envelope.
func (s *Store) single(ctx context.Context, c call, id ExecutionID, op string) ([]valkey.ValkeyMessage, error) {
	msg, err := s.fcall(ctx, c)
	if err != nil {
		return nil, err
	}
	items, ref, err := envelope(msg)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", c.fn, err)
	}
	if ref != nil {
		return nil, refusalError(ref, id, op)
	}
	return items, nil
}

// locate splits an id into partition and uuid and checks the partition.
func (s *Store) locate(id ExecutionID) (int, string, error) {
	p, uuid, err := splitID(string(id))
	if err != nil {
		return 0, "", err
	}
	if p >= s.cfg.FlowPartitions {
		return 0, "", fmt.Errorf("%w: execution %s (partition %d of %d)", ErrNotFound, id, p, s.cfg.FlowPartitions)
	}
	return p, uuid, nil
}

func makeID(p int, uuid string) ExecutionID { return ExecutionID(strconv.Itoa(p) + "." + uuid) }

// newUUID returns a random (version 4) UUID.
func newUUID() string { return newUUIDs(1)[0] }

// newUUIDs returns n random (version 4) UUIDs, made with one read of
// random bytes and one allocation for their text (a run's staging needs
// one per member).
func newUUIDs(n int) []string {
	raw := make([]byte, 16*n)
	rand.Read(raw)
	text := make([]byte, 0, 36*n)
	for i := range n {
		b := raw[16*i : 16*i+16]
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		text = hex.AppendEncode(text, b[0:4])
		text = append(text, '-')
		text = hex.AppendEncode(text, b[4:6])
		text = append(text, '-')
		text = hex.AppendEncode(text, b[6:8])
		text = append(text, '-')
		text = hex.AppendEncode(text, b[8:10])
		text = append(text, '-')
		text = hex.AppendEncode(text, b[10:16])
	}
	all := string(text)
	out := make([]string, n)
	for i := range out {
		out[i] = all[36*i : 36*i+36]
	}
	return out
}

// randomToken returns n random bytes in hex.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func fromMs(s string) time.Time { return msTime(atoi64(s)) }

// msTime is fromMs of a number of milliseconds already parsed.
func msTime(n int64) time.Time {
	if n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// str returns a reply element as a string: Lua replies numbers as RESP
// integers and strings as bulk strings.
func str(m valkey.ValkeyMessage) string {
	if m.IsInt64() {
		n, _ := m.AsInt64()
		return strconv.FormatInt(n, 10)
	}
	v, _ := m.ToString()
	return v
}

func atoi(s string) int { return int(atoi64(s)) }

// num returns a reply element as an integer, as atoi64(str(m)) does,
// without writing an integer reply out as text first.
func num(m valkey.ValkeyMessage) int64 {
	if m.IsInt64() {
		n, _ := m.AsInt64()
		return n
	}
	s, _ := m.ToString()
	return atoi64(s)
}

// atoi64 parses an integer the server formatted; it also accepts the
// exponent form some servers use for large Lua numbers.
func atoi64(s string) int64 {
	if s == "" {
		return 0 // as below, without the two parse errors' allocations
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0
		}
		return int64(f)
	}
	return n
}

// FlowPartitions returns the number of flow partitions.
func (s *Store) FlowPartitions() int { return s.cfg.FlowPartitions }

// BudgetPartitions returns the number of budget partitions.
func (s *Store) BudgetPartitions() int { return s.cfg.BudgetPartitions }

// QuotaPartitions returns the number of quota partitions.
func (s *Store) QuotaPartitions() int { return s.cfg.QuotaPartitions }

// WakeChannel returns the pub/sub channel on which every call that makes
// executions eligible publishes a wake-up (see Wake for when, and
// ParseWake).
func (s *Store) WakeChannel() string { return s.cfg.KeyPrefix + wakeChannel }
