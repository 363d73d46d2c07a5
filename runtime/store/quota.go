package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/valkey-io/valkey-go"
)

// Quota limits.
const (
	// MaxQuotaKeyBytes bounds a keyed quota's key value.
	MaxQuotaKeyBytes = 128
	// QuotaWindowDefault is the window of a rate quota that sets none.
	QuotaWindowDefault = time.Second
	// QuotaPauseMax bounds a pause of a quota subject.
	QuotaPauseMax = 7 * 24 * time.Hour
	// MaxPauseReasonBytes bounds the reason given for a pause.
	MaxPauseReasonBytes = 512
	// PauseRecheckDefault is Config.PauseRecheck's default: an execution
	// blocked by a pause is due for the unblock scanner again this soon (its
	// reads are bounded per tick, so a short recheck costs a bounded read,
	// not one per execution), so an early resume is seen within seconds.
	PauseRecheckDefault = 5 * time.Second
)

// QuotaSpec defines a quota for UpsertQuota.
type QuotaSpec struct {
	ID          string        // "<ns>/<name>" (QuotaID)
	Rate        int64         // admissions per Window; 0 = no rate limit
	Window      time.Duration // sliding window; 0 = QuotaWindowDefault
	Concurrency int64         // attempts running at once; 0 = no cap
	Jitter      time.Duration // random extra wait added to a denied execution's recheck
	// Key is a dotted field path into the execution's input (JSON): the
	// limits apply separately to each value found there. "" = unkeyed.
	Key string
}

// QuotaID returns the id of quota name of namespace ns.
func QuotaID(namespace, name string) string { return namespace + "/" + name }

// QuotaSpecFromPlan converts a declared quota of namespace ns.
func QuotaSpecFromPlan(ns string, q plan.Quota) QuotaSpec {
	return QuotaSpec{ID: QuotaID(ns, q.Name), Rate: q.Rate, Window: time.Duration(q.WindowMs) * time.Millisecond,
		Concurrency: q.Concurrency, Jitter: time.Duration(q.JitterMs) * time.Millisecond, Key: q.Key}
}

// QuotaSubject is the state of one subject of a quota: the quota itself,
// or one key value of a keyed quota.
type QuotaSubject struct {
	Key      string `json:"key,omitempty"` // "" for an unkeyed quota
	InWindow int64  `json:"window_count"`  // admissions in the current window
	Active   int64  `json:"active_count"`  // slots held by running attempts
	// PausedUntil is the end of a pause (PauseQuota) in force; PauseReason
	// its reason.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	PauseReason string    `json:"pause_reason,omitempty"`
}

// Quota is a quota's definition and state (GetQuota).
type Quota struct {
	ID          string         `json:"id"`
	Rate        int64          `json:"rate,omitempty"`
	Window      time.Duration  `json:"window,omitempty"`
	Concurrency int64          `json:"concurrency,omitempty"`
	Jitter      time.Duration  `json:"jitter,omitempty"`
	Key         string         `json:"key,omitempty"`
	Subjects    []QuotaSubject `json:"subjects"` // unkeyed: one; keyed: one per key value seen, by key
	// SubjectsMore counts the key values left out: ListQuotas gives
	// QuotaListSubjectsMax of each quota, GetQuota QuotaGetSubjectsMax.
	SubjectsMore int       `json:"subjects_more,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"` // the last upsert that changed the definition
}

// Causes of a quota denial (AdmitResult.Cause).
const (
	QuotaDeniedRate        = "rate"
	QuotaDeniedConcurrency = "concurrency"
	QuotaDeniedPaused      = "paused" // the subject is paused (PauseQuota)
	// QuotaDeniedContended: at the concurrency cap, a slot held for the
	// same attempt under another token (another scheduler admitted it):
	// that scheduler's claim grants it, so it is not blocked.
	QuotaDeniedContended = "contended"
	QuotaUndefined       = "undefined" // the quota does not exist
)

// AdmitResult is the outcome of AdmitQuota.
type AdmitResult struct {
	Subject    string        `json:"subject"`
	Admitted   bool          `json:"admitted"`
	Cause      string        `json:"cause,omitempty"`       // when denied: QuotaDenied… or QuotaUndefined
	RetryAfter time.Duration `json:"retry_after,omitempty"` // when denied for rate: until the window slides; paused: until the pause ends, at most Config.PauseRecheck (plus jitter)
	InWindow   int64         `json:"window_count"`
	Active     int64         `json:"active_count"`
	// When denied for a pause: its end and reason.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	PauseReason string    `json:"pause_reason,omitempty"`
}

// Detail is the human-readable blocking detail of a denial.
func (r AdmitResult) Detail() string {
	switch r.Cause {
	case QuotaDeniedRate:
		return fmt.Sprintf("quota %s: rate limit reached (%d admissions in the window)", r.Subject, r.InWindow)
	case QuotaDeniedConcurrency, QuotaDeniedContended:
		return fmt.Sprintf("quota %s: concurrency limit reached (%d running)", r.Subject, r.Active)
	case QuotaUndefined:
		return fmt.Sprintf("quota %s is not defined", r.Subject)
	case QuotaDeniedPaused:
		d := fmt.Sprintf("quota %s: paused until %s", r.Subject, r.PausedUntil.UTC().Format(time.RFC3339))
		if r.PauseReason != "" {
			d += " (" + r.PauseReason + ")"
		}
		return d
	}
	return ""
}

// QuotaPause is a pause of a quota subject (PauseQuota): until End, or
// for For from the server's clock when End is zero.
type QuotaPause struct {
	Key    string        // the key value of a keyed quota; "" for an unkeyed one
	End    time.Time     // the pause's end; or
	For    time.Duration // its length (whole milliseconds)
	Reason string        // shown in the blocked executions' detail; no control characters
}

// PauseQuota stops admissions under one subject of quota id until the
// pause ends: executions that need it are blocked (waiting_for_quota,
// "paused until …") and checked again at the end, or within
// Config.PauseRecheck when it is ended early (ResumeQuota). Attempts
// admitted before keep running. Pausing again replaces the end and reason.
// It is how a handler told "429, retry after 60 s" by an upstream holds
// back every other execution that would call it.
func (s *Store) PauseQuota(ctx context.Context, id string, p QuotaPause) error {
	if _, _, _, err := splitResourceID("id", id, false); err != nil {
		return err
	}
	if err := checkPauseKey(p.Key); err != nil {
		return err
	}
	if len(p.Reason) > MaxPauseReasonBytes {
		return invalid("reason", "%d bytes, the limit is %d", len(p.Reason), MaxPauseReasonBytes)
	}
	if !utf8.ValidString(p.Reason) || strings.ContainsFunc(p.Reason, unicode.IsControl) {
		return invalid("reason", "must be valid UTF-8 without control characters")
	}
	end, length := "", ""
	switch {
	case !p.End.IsZero() && p.For != 0:
		return invalid("for_ms", "give an end or a length, not both")
	case !p.End.IsZero():
		if p.End.UnixMilli() <= 0 || time.Until(p.End) > QuotaPauseMax {
			return invalid("until", "%s is not a time within %s", p.End.UTC().Format(time.RFC3339), QuotaPauseMax)
		}
		end = strconv.FormatInt(p.End.UnixMilli(), 10)
	case p.For < time.Millisecond || p.For > QuotaPauseMax:
		return invalid("for_ms", "%s is outside 1ms..%s", p.For, QuotaPauseMax)
	default:
		length = strconv.FormatInt(p.For.Milliseconds(), 10)
	}
	_, err := s.pauseCall(ctx, id, p.Key, end, p.Reason, length)
	return err
}

// ResumeQuota ends a pause of a quota subject; it reports whether one was
// in force.
func (s *Store) ResumeQuota(ctx context.Context, id, key string) (bool, error) {
	if _, _, _, err := splitResourceID("id", id, false); err != nil {
		return false, err
	}
	if err := checkPauseKey(key); err != nil {
		return false, err
	}
	st, err := s.pauseCall(ctx, id, key, "0", "", "")
	return st == "resumed", err
}

// checkPauseKey checks the key value of a subject to pause: one an
// execution's input can give (see extractKey), or "" for an unkeyed quota.
func checkPauseKey(key string) error {
	if key == "" {
		return nil
	}
	return checkToken("key", key, MaxQuotaKeyBytes)
}

func (s *Store) pauseCall(ctx context.Context, id, key, end, reason, length string) (string, error) {
	subject := id
	if key != "" {
		subject = id + "=" + key
	}
	q := s.quotaPart(id)
	items, err := s.single(ctx, call{fn: "ff_quota_pause", keys: []string{s.k.quota(q, id), s.k.quota(q, subject) + ":paused"},
		args: []string{end, reason, key, length}}, "", "pause quota")
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%w: quota %s", ErrNotFound, id)
	}
	if err != nil {
		return "", err
	}
	return str(items[0]), nil
}

func (s *Store) quotaPart(id string) int { return fnvPart(id, s.cfg.QuotaPartitions) }

// splitSubject splits a subject "<id>[=<key value>]".
func splitSubject(subject string) (id, key string) {
	id, key, _ = strings.Cut(subject, "=")
	return id, key
}

// UpsertQuota creates a quota, or updates its definition keeping its
// windows and slots.
func (s *Store) UpsertQuota(ctx context.Context, spec QuotaSpec) (created bool, err error) {
	st, err := s.upsertQuota(ctx, spec, false)
	return st == "created", err
}

func (s *Store) upsertQuota(ctx context.Context, spec QuotaSpec, onlyCreate bool) (string, error) {
	args, err := quotaArgs(&spec, onlyCreate)
	if err != nil {
		return "", err
	}
	items, err := s.single(ctx, call{fn: "ff_quota_upsert", keys: []string{s.k.quota(s.quotaPart(spec.ID), spec.ID)},
		args: args}, "", "upsert quota")
	if err != nil {
		return "", err
	}
	return str(items[0]), nil
}

// quotaArgs validates spec, fills in its defaults and returns the
// arguments of ff_quota_upsert.
func quotaArgs(spec *QuotaSpec, onlyCreate bool) ([]string, error) {
	if _, _, _, err := splitResourceID("id", spec.ID, false); err != nil {
		return nil, err
	}
	if spec.Rate < 0 || spec.Concurrency < 0 {
		return nil, invalid("rate", "limits must not be negative")
	}
	if spec.Rate == 0 && spec.Concurrency == 0 {
		return nil, invalid("rate", "a quota needs a rate or a concurrency limit")
	}
	if err := checkDuration("window", spec.Window); err != nil {
		return nil, err
	}
	if err := checkDuration("jitter", spec.Jitter); err != nil {
		return nil, err
	}
	if spec.Window == 0 {
		spec.Window = QuotaWindowDefault
	}
	if spec.Key != "" {
		for _, seg := range strings.Split(spec.Key, ".") {
			if seg == "" {
				return nil, invalid("key", "%q: want a dotted field path", spec.Key)
			}
		}
		if err := checkToken("key", spec.Key, plan.MaxQuotaKeyLen); err != nil {
			return nil, err
		}
	}
	only := "0"
	if onlyCreate {
		only = "1"
	}
	return []string{strconv.FormatInt(spec.Rate, 10), ms(spec.Window), strconv.FormatInt(spec.Concurrency, 10),
		ms(spec.Jitter), spec.Key, only}, nil
}

// GetQuota returns a quota with its window and active counts (per key
// value for a keyed quota: the first QuotaGetSubjectsMax by key, and
// SubjectsMore counting the others; GetQuotaKey reads any one) and pauses.
func (s *Store) GetQuota(ctx context.Context, id string) (*Quota, error) {
	return s.getQuota(ctx, id, nil)
}

// GetQuotaKey returns a quota with the state of one subject only: key
// value key of a keyed quota ("" for an unkeyed one; a key value of an
// unkeyed quota is refused, ErrInvalid on field "key"), with zero counts
// when it had no recent activity. It reads one subject however many keys
// the quota has.
func (s *Store) GetQuotaKey(ctx context.Context, id, key string) (*Quota, error) {
	return s.getQuota(ctx, id, &key)
}

func (s *Store) getQuota(ctx context.Context, id string, only *string) (*Quota, error) {
	if _, _, _, err := splitResourceID("id", id, false); err != nil {
		return nil, err
	}
	if only != nil {
		if err := checkPauseKey(*only); err != nil {
			return nil, err // a subject no execution can have, as pausing it is
		}
	}
	q := s.quotaPart(id)
	key := s.k.quota(q, id)
	cmds := valkey.Commands{s.c.B().Hgetall().Key(key).Build(), s.c.B().Time().Build()}
	if only == nil {
		cmds = append(cmds, s.keysStep(key, 0))
	}
	resps := s.c.DoMulti(ctx, cmds...)
	def, err := resps[0].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("store: read quota %s: %w", id, err)
	}
	if len(def) == 0 {
		return nil, fmt.Errorf("%w: quota %s", ErrNotFound, id)
	}
	if only != nil && *only != "" && def["key"] == "" {
		// As pausing and resuming one refuse it: no subject has a key.
		return nil, invalid("key", "the quota is not keyed: give no key value")
	}
	now, err := timeOf(resps[1])
	if err != nil {
		return nil, err
	}
	var keyVals []string
	if only == nil {
		if keyVals, err = s.quotaKeys(ctx, key, resps[2]); err != nil {
			return nil, fmt.Errorf("store: read quota keys %s: %w", id, err)
		}
	}
	out, subjects := quotaFrom(id, def, keyVals, only)
	if n := len(subjects); n > QuotaGetSubjectsMax {
		out.SubjectsMore, subjects = n-QuotaGetSubjectsMax, subjects[:QuotaGetSubjectsMax]
	}
	states, err := s.subjectStates(ctx, q, subjects, out.Window, now)
	if err != nil {
		return nil, err
	}
	addSubjects(out, subjects, states)
	return out, nil
}

// quotaKeysStep is the COUNT of each SSCAN step that reads a keyed quota's
// key values: a quota with many is read in steps that each hold Valkey
// briefly, where one SMEMBERS would hold it for the whole set.
const quotaKeysStep = 1000

// keysStep is the SSCAN step from cursor of the key values of quota key.
func (s *Store) keysStep(key string, cursor uint64) valkey.Completed {
	return s.c.B().Sscan().Key(key + ":keys").Cursor(cursor).Count(quotaKeysStep).Build()
}

// quotaKeys returns the key values of quota key, given the answer to its
// first step (keysStep from 0): it reads the steps left one by one and
// keeps each value once (SSCAN may answer one twice).
func (s *Store) quotaKeys(ctx context.Context, key string, first valkey.ValkeyResult) ([]string, error) {
	e, err := first.AsScanEntry()
	if err != nil {
		return nil, err
	}
	if e.Cursor == 0 {
		return e.Elements, nil // one step: a small set answers whole
	}
	seen := map[string]bool{}
	var out []string
	for {
		for _, v := range e.Elements {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
		if e.Cursor == 0 {
			return out, nil
		}
		if e, err = s.c.Do(ctx, s.keysStep(key, e.Cursor)).AsScanEntry(); err != nil {
			return nil, err
		}
	}
}

// quotaFrom builds quota id from its definition and the key values seen
// (a keyed quota), without the states of its subjects, and returns the
// subjects whose states it shows: the quota, one per key value, or only
// the subject of key value *only.
func quotaFrom(id string, def map[string]string, keyVals []string, only *string) (*Quota, []string) {
	out := &Quota{ID: id, Rate: atoi64(def["rate"]), Window: time.Duration(atoi64(def["window_ms"])) * time.Millisecond,
		Concurrency: atoi64(def["concurrency"]), Jitter: time.Duration(atoi64(def["jitter_ms"])) * time.Millisecond,
		Key: def["key"], CreatedAt: fromMs(def["created_at"]), UpdatedAt: fromMs(def["updated_at"]), Subjects: []QuotaSubject{}}
	subjects := []string{id}
	switch {
	case only != nil && *only != "":
		subjects = []string{id + "=" + *only}
	case only != nil:
	case out.Key != "":
		slices.Sort(keyVals)
		subjects = subjects[:0]
		for _, k := range keyVals {
			subjects = append(subjects, id+"="+k)
		}
	}
	return out, subjects
}

// addSubjects appends the states of subjects to q.
func addSubjects(q *Quota, subjects []string, states []subjectState) {
	for i, sub := range subjects {
		_, k := splitSubject(sub)
		q.Subjects = append(q.Subjects, QuotaSubject{Key: k, InWindow: states[i].inWindow, Active: states[i].active,
			PausedUntil: states[i].pausedUntil, PauseReason: states[i].pauseReason})
	}
}

// subjectState is what subjectStates reads of a quota subject.
type subjectState struct {
	inWindow, active int64
	pausedUntil      time.Time // zero: not paused
	pauseReason      string
}

func timeOf(m valkey.ValkeyResult) (int64, error) {
	v, err := m.AsStrSlice()
	if err != nil || len(v) != 2 {
		return 0, fmt.Errorf("store: TIME: %v", err)
	}
	sec, _ := strconv.ParseInt(v[0], 10, 64)
	usec, _ := strconv.ParseInt(v[1], 10, 64)
	return sec*1000 + usec/1000, nil
}

// subjectStates reads the window count (admissions after now-window),
// active count and pause of subjects of quota partition q.
func (s *Store) subjectStates(ctx context.Context, q int, subjects []string, window time.Duration, now int64) ([]subjectState, error) {
	return subjectStatesFrom(s.c.DoMulti(ctx, s.subjectReads(q, subjects, window, now)...), len(subjects), now)
}

// subjectReads are the reads of subjectStates, three per subject.
func (s *Store) subjectReads(q int, subjects []string, window time.Duration, now int64) valkey.Commands {
	cmds := make(valkey.Commands, 0, 3*len(subjects))
	for _, sub := range subjects {
		k := s.k.quota(q, sub)
		cmds = append(cmds,
			s.c.B().Zcount().Key(k+":window").Min("("+strconv.FormatInt(now-window.Milliseconds(), 10)).Max("+inf").Build(),
			s.c.B().Zcard().Key(k+":slots").Build(),
			s.c.B().Hmget().Key(k+":paused").Field("until", "reason").Build())
	}
	return cmds
}

// subjectStatesFrom reads the states of n subjects from the replies of
// subjectReads.
func subjectStatesFrom(rs []valkey.ValkeyResult, n int, now int64) ([]subjectState, error) {
	out := make([]subjectState, n)
	for i := range n {
		inWindow, err1 := rs[3*i].AsInt64()
		active, err2 := rs[3*i+1].AsInt64()
		pause, err3 := rs[3*i+2].ToArray()
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("store: read quota state: %w", err)
		}
		out[i] = subjectState{inWindow: inWindow, active: active}
		if len(pause) == 2 {
			if to := atoi64(str(pause[0])); to > now {
				out[i].pausedUntil, out[i].pauseReason = time.UnixMilli(to), str(pause[1])
			}
		}
	}
	return out, nil
}

// AdmitQuota admits one attempt of an execution under a quota subject
// ("<id>" or "<id>=<key value>", as stored in Execution.Quotas): one atomic
// call on the quota's partition that records the admission in the sliding
// window and takes a concurrency slot, or denies. Idempotent per admission
// (execution id, attempt, token): a repeat while the slot is held admits
// again without counting twice. Pass the admission in
// ClaimRequest.Admitted; one the claim does not grant must be given back
// with ReleaseQuota(…, unused=true) (ClaimAdmitted does all of this). A
// granted attempt's slot is released when the attempt ends (see
// DrainQuotaReleases).
func (s *Store) AdmitQuota(ctx context.Context, subject string, a Admitted) (AdmitResult, error) {
	if err := checkAdmitted(a); err != nil {
		return AdmitResult{}, err
	}
	res, err := s.admitMany(ctx, []admitItem{{subject, a}})
	if err != nil {
		return AdmitResult{}, err
	}
	return res[0], nil
}

type admitItem struct {
	subject string
	a       Admitted
}

func checkAdmitted(a Admitted) error {
	if _, err := ParseExecutionID(string(a.ExecutionID)); err != nil {
		return err
	}
	if a.Attempt < 1 {
		return invalid("attempt", "%d: attempts count from 1", a.Attempt)
	}
	if a.Resets < 0 {
		return invalid("resets", "%d: a reset count is not negative", a.Resets)
	}
	for _, c := range a.Token {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') || len(a.Token) > 64 {
			return invalid("token", "%q: want up to 64 letters and digits", a.Token)
		}
	}
	return nil
}

// admitMany runs ff_quota_admit for items: one call per subject (the
// holders of a subject in item order), pipelined.
func (s *Store) admitMany(ctx context.Context, items []admitItem) ([]AdmitResult, error) {
	var calls []call
	var index [][]int // index[c] = positions of call c's holders in items
	bySubject := map[string]int{}
	for i, it := range items {
		c, ok := bySubject[it.subject]
		if !ok {
			qid, key := splitSubject(it.subject)
			if _, _, _, err := splitResourceID("quota", qid, false); err != nil {
				return nil, err
			}
			q := s.quotaPart(qid)
			c = len(calls)
			bySubject[it.subject] = c
			calls = append(calls, call{fn: "ff_quota_admit",
				keys: []string{s.k.quota(q, qid), s.k.quota(q, it.subject) + ":window", s.k.quota(q, it.subject) + ":slots",
					s.k.quota(q, it.subject) + ":paused"},
				args: []string{key, strconv.Itoa(rand.IntN(1_000_000_000)), it.subject}})
			index = append(index, nil)
		}
		calls[c].args = append(calls[c].args, it.a.holder())
		index[c] = append(index[c], i)
	}
	msgs, err := s.fcallMany(ctx, calls)
	if err != nil {
		return nil, err
	}
	out := make([]AdmitResult, len(items))
	for c, msg := range msgs {
		v, ref, err := envelope(msg)
		if err != nil {
			return nil, fmt.Errorf("store: ff_quota_admit: %w", err)
		}
		for j, i := range index[c] {
			r := AdmitResult{Subject: items[i].subject}
			switch {
			case ref != nil && ref.code == "not_found":
				r.Cause = QuotaUndefined
			case ref != nil:
				return nil, refusalError(ref, items[i].a.ExecutionID, "admit")
			default:
				if j >= len(v) {
					return nil, fmt.Errorf("store: ff_quota_admit: %d results for %d holders", len(v), len(index[c]))
				}
				f, err := v[j].ToArray()
				if err != nil || len(f) < 5 {
					return nil, fmt.Errorf("store: ff_quota_admit: malformed result: %v", err)
				}
				r.InWindow, r.Active = atoi64(str(f[3])), atoi64(str(f[4]))
				if str(f[0]) == "denied" {
					r.Cause = str(f[1])
					// Checked again within PauseRecheck whatever the
					// cause: a pause ended early, a rate or a cap raised
					// is noticed then (the unblock pass admits only
					// what has room, so no crowd wakes up).
					r.RetryAfter = min(time.Duration(atoi64(str(f[2])))*time.Millisecond, s.cfg.PauseRecheck)
					if r.Cause == QuotaDeniedPaused && len(f) >= 7 {
						r.PausedUntil, r.PauseReason = time.UnixMilli(atoi64(str(f[5]))), str(f[6])
					}
				} else {
					r.Admitted = true
				}
			}
			out[i] = r
		}
	}
	return out, nil
}

// ReleaseQuota frees the slot of one admission under a quota subject
// (idempotent). With unused, the admission also leaves the window: the
// attempt never ran (its claim did not grant it).
func (s *Store) ReleaseQuota(ctx context.Context, subject string, a Admitted, unused bool) error {
	if err := checkAdmitted(a); err != nil {
		return err
	}
	return s.releaseMany(ctx, map[string][]string{subject: {a.holder()}}, unused)
}

// releaseMany frees holders per subject, pipelined.
func (s *Store) releaseMany(ctx context.Context, bySubject map[string][]string, unused bool) error {
	if len(bySubject) == 0 {
		return nil
	}
	flag := "0"
	if unused {
		flag = "1"
	}
	var calls []call
	for sub, hs := range bySubject {
		qid, _ := splitSubject(sub)
		if _, _, _, err := splitResourceID("quota", qid, false); err != nil {
			return err
		}
		k := s.k.quota(s.quotaPart(qid), sub)
		calls = append(calls, call{fn: "ff_quota_release", keys: []string{k + ":slots", k + ":window"}, args: append([]string{flag}, hs...)})
	}
	_, err := s.fcallMany(ctx, calls)
	return err
}

// DrainQuotaReleases releases up to limit quota slots owed by attempts of
// flow partition p that ended (every transition that ends an attempt
// holding slots — complete, fail, timeout, lease expiry, cancel, deadline —
// queues their release in the same FCALL, in B:qrelease). The slots are
// freed on their quota partitions first, then the queue entries are
// removed, so a crash in between only repeats an idempotent release.
func (s *Store) DrainQuotaReleases(ctx context.Context, p, limit int) (ScanResult, error) {
	if p < 0 || p >= s.cfg.FlowPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", p, s.cfg.FlowPartitions-1)
	}
	if limit < 1 || limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", limit, ScanLimitMax)
	}
	key := s.k.qrelease(p)
	entries, err := s.c.Do(ctx, s.c.B().Zrange().Key(key).Min("0").Max(strconv.Itoa(limit-1)).Build()).AsStrSlice()
	if err != nil {
		return ScanResult{}, fmt.Errorf("store: read quota releases: %w", err)
	}
	if len(entries) == 0 {
		return ScanResult{}, nil
	}
	by := map[string][]string{}
	for _, e := range entries {
		sub, h, ok := strings.Cut(e, "\t")
		qid, _ := splitSubject(sub)
		if _, _, _, err := splitResourceID("quota", qid, false); !ok || err != nil {
			s.log.WarnContext(ctx, "dropping a malformed quota release entry", attrEntry, e)
			continue // removed below with the others
		}
		by[sub] = append(by[sub], h)
	}
	if err := s.releaseMany(ctx, by, false); err != nil {
		return ScanResult{}, err
	}
	if err := s.c.Do(ctx, s.c.B().Zrem().Key(key).Member(entries...).Build()).Error(); err != nil {
		return ScanResult{}, fmt.Errorf("store: forget quota releases: %w", err)
	}
	return ScanResult{Processed: len(entries), More: len(entries) >= limit}, nil
}

// ReconcileQuotaSlots is the backstop against leaked slots on quota
// partition q. A slot's score is its admission time, or the last time this
// check found its holder running; a slot whose score is more than grace
// ago is due. A due slot whose holder is not running (its execution is not
// active under that admission — the record's qheld — or is gone) is freed;
// one whose holder runs is re-scored to now (only if it is still held), so
// it is due again a grace later and the slots behind it come first. It
// catches an admission whose claim never happened (a scheduler that died
// between AdmitQuota and Claim) and a release that was never queued. grace
// must exceed the time between AdmitQuota and the Claim that uses it
// (milliseconds in practice).
//
// Each call looks at about limit subjects of the partition (SSCAN), from
// where the last call's walk stopped (<prefix>ff:{q:K}:subjects:sweep, the
// cursor, deleted at the end of a pass), so its cost follows its limit, not
// the key values seen. It checks up to limit of their due slots, the
// subjects whose oldest due slot is oldest first, so slots of long-running
// attempts never hide a leaked one behind them: while due slots of the
// subjects looked at are left unchecked, the walk stays where it is. It
// returns the slots freed; More is set when due slots were left unchecked,
// or when the pass is not over and the call forgot subjects. Subjects of
// the call that hold no slot and have an empty window and no pause are
// forgotten (ff_quota_forget), so keyed quotas do not accumulate key
// values. A leaked slot is found within a pass over the subjects.
func (s *Store) ReconcileQuotaSlots(ctx context.Context, q int, grace time.Duration, limit int) (ScanResult, error) {
	if q < 0 || q >= s.cfg.QuotaPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", q, s.cfg.QuotaPartitions-1)
	}
	if limit < 1 || limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", limit, ScanLimitMax)
	}
	sweep := s.k.subjects(q) + ":sweep"
	resps := s.c.DoMulti(ctx, s.c.B().Get().Key(sweep).Build(), s.c.B().Time().Build())
	from, err := resps[0].ToString()
	if valkey.IsValkeyNil(err) {
		from, err = "0", nil
	}
	if err != nil {
		return ScanResult{}, fmt.Errorf("store: read quota subject cursor: %w", err)
	}
	cursor, err := strconv.ParseUint(from, 10, 64)
	if err != nil {
		cursor, from = 0, "0" // not a cursor: a new pass
	}
	now, err := timeOf(resps[1])
	if err != nil {
		return ScanResult{}, err
	}
	scan, err := s.c.Do(ctx, s.c.B().Sscan().Key(s.k.subjects(q)).Cursor(cursor).Count(int64(limit)).Build()).AsScanEntry()
	if err != nil {
		return ScanResult{}, fmt.Errorf("store: read quota subjects: %w", err)
	}
	subjects := scan.Elements
	next := strconv.FormatUint(scan.Cursor, 10)
	// advance moves the walk on to the subjects after those of this call.
	advance := func() error {
		var err error
		switch {
		case next == from:
		case next != "0":
			err = s.c.Do(ctx, s.c.B().Set().Key(sweep).Value(next).Build()).Error()
		default:
			err = s.c.Do(ctx, s.c.B().Del().Key(sweep).Build()).Error()
		}
		if err != nil {
			return fmt.Errorf("store: move the quota subject cursor: %w", err)
		}
		return nil
	}
	cutoff := strconv.FormatInt(now-grace.Milliseconds(), 10)
	// due: a subject with due slots, its oldest slot's score and how many.
	type due struct {
		subject string
		oldest  float64
		count   int64
	}
	var dues []due
	var idle []string // subjects without slots: forgotten when their window is empty too
	total := int64(0)
	const chunk = 256
	for i := 0; i < len(subjects); i += chunk {
		part := subjects[i:min(i+chunk, len(subjects))]
		cmds := make(valkey.Commands, 0, 2*len(part))
		for _, sub := range part {
			k := s.k.quota(q, sub) + ":slots"
			cmds = append(cmds, s.c.B().Zrange().Key(k).Min("0").Max("0").Withscores().Build(),
				s.c.B().Zcount().Key(k).Min("-inf").Max(cutoff).Build())
		}
		rs := s.c.DoMulti(ctx, cmds...)
		for j, sub := range part {
			oldest, err1 := rs[2*j].AsZScores()
			n, err2 := rs[2*j+1].AsInt64()
			if err := errors.Join(err1, err2); err != nil {
				return ScanResult{}, fmt.Errorf("store: read quota slots: %w", err)
			}
			switch {
			case len(oldest) == 0:
				idle = append(idle, sub)
			case n > 0:
				dues = append(dues, due{sub, oldest[0].Score, n})
				total += n
			}
		}
	}
	forgot := false
	if len(idle) > 0 {
		items, err := s.single(ctx, call{fn: "ff_quota_forget", keys: []string{s.k.subjects(q)}, args: idle}, "", "ff_quota_forget")
		if err != nil {
			return ScanResult{}, err
		}
		if len(items) > 0 {
			n, _ := items[0].AsInt64()
			forgot = n > 0
		}
	}
	if total <= int64(limit) {
		// Every due slot of these subjects is checked below: the next call
		// looks at the next ones.
		if err := advance(); err != nil {
			return ScanResult{}, err
		}
	}
	if len(dues) == 0 {
		return ScanResult{More: forgot && next != "0"}, nil
	}
	slices.SortFunc(dues, func(a, b due) int {
		return cmp.Or(cmp.Compare(a.oldest, b.oldest), strings.Compare(a.subject, b.subject))
	})
	var reads valkey.Commands
	var readOf []string // the subject of each read
	for n := int64(0); len(reads) < len(dues) && n < int64(limit); {
		d := dues[len(reads)]
		take := min(d.count, int64(limit)-n)
		reads = append(reads, s.c.B().Zrangebyscore().Key(s.k.quota(q, d.subject)+":slots").Min("-inf").Max(cutoff).
			Limit(0, take).Build())
		readOf = append(readOf, d.subject)
		n += take
	}
	type slot struct{ subject, holder string }
	var slots []slot
	for i, r := range s.c.DoMulti(ctx, reads...) {
		hs, err := r.AsStrSlice()
		if err != nil {
			return ScanResult{}, fmt.Errorf("store: read quota slots: %w", err)
		}
		for _, h := range hs {
			slots = append(slots, slot{readOf[i], h})
		}
	}
	if len(slots) == 0 {
		return ScanResult{More: forgot && next != "0"}, nil
	}
	cmds := make(valkey.Commands, len(slots))
	for i, sl := range slots {
		id, _, _ := strings.Cut(sl.holder, "#")
		p, uuid, err := splitID(id)
		if err != nil || p >= s.cfg.FlowPartitions {
			cmds[i] = s.c.B().Echo().Message("").Build() // malformed holder: free it
			continue
		}
		cmds[i] = s.c.B().Hmget().Key(s.k.core(p, uuid)).Field("state", "qheld").Build()
	}
	stale := map[string][]string{}
	live := map[string][]string{}
	n := 0
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		_, held, _ := strings.Cut(slots[i].holder, "#") // "<attempt>#<token>"
		v, err := r.ToArray()
		if err != nil {
			if _, e := r.ToString(); e != nil {
				return ScanResult{}, fmt.Errorf("store: read slot holder: %w", err)
			}
			v = nil // the ECHO of a malformed holder
		}
		if len(v) == 2 && decodeState(str(v[0]), "").Lifecycle == LifecycleActive && str(v[1]) == held {
			live[slots[i].subject] = append(live[slots[i].subject], slots[i].holder)
			continue
		}
		stale[slots[i].subject] = append(stale[slots[i].subject], slots[i].holder)
		n++
	}
	if err := s.releaseMany(ctx, stale, false); err != nil {
		return ScanResult{}, err
	}
	if len(live) > 0 {
		// XX: a slot released meanwhile is not brought back; GT: never
		// earlier than another check put it.
		var touch valkey.Commands
		for sub, hs := range live {
			z := s.c.B().Zadd().Key(s.k.quota(q, sub) + ":slots").Xx().Gt().ScoreMember()
			for _, h := range hs {
				z = z.ScoreMember(float64(now), h)
			}
			touch = append(touch, z.Build())
		}
		for _, r := range s.c.DoMulti(ctx, touch...) {
			if err := r.Error(); err != nil {
				return ScanResult{Processed: n}, fmt.Errorf("store: re-score running quota slots: %w", err)
			}
		}
	}
	return ScanResult{Processed: n, More: total > int64(len(slots)) || (forgot && next != "0")}, nil
}

// quotaKeyFields reads the key field of quotas (nil entry: undefined).
func (s *Store) quotaKeyFields(ctx context.Context, ids []string) (map[string]*string, error) {
	out := map[string]*string{}
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make(valkey.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = s.c.B().Hmget().Key(s.k.quota(s.quotaPart(id), id)).Field("key", "rate").Build()
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		v, err := r.ToArray()
		if err != nil {
			return nil, fmt.Errorf("store: read quota %s: %w", ids[i], err)
		}
		if v[1].IsNil() {
			out[ids[i]] = nil
			continue
		}
		k := str(v[0])
		out[ids[i]] = &k
	}
	return out, nil
}

// extractKey returns the value at a dotted field path of a JSON object, as
// a quota key value: a string as is, a number or boolean as its JSON text.
func extractKey(field string, payload []byte, path string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", invalid(field, "the quota key %q is read from the input, which is not JSON: %v", path, err)
	}
	for _, seg := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "", invalid(field, "the input has no field %q (the quota key)", path)
		}
		if v, ok = m[seg]; !ok {
			return "", invalid(field, "the input has no field %q (the quota key)", path)
		}
	}
	var k string
	switch x := v.(type) {
	case string:
		k = x
	case json.Number:
		k = x.String()
	case bool:
		k = strconv.FormatBool(x)
	default:
		return "", invalid(field, "the quota key %q must be a string, number or boolean in the input", path)
	}
	if err := checkToken(field, k, MaxQuotaKeyBytes); err != nil {
		return "", invalid(field, "quota key value at %q: %s", path, err.(*ValidationError).Msg)
	}
	return k, nil
}

// quotaRefID returns the quota id of a quota reference ("<name>", "<id>",
// either with "=<key value>") of an execution of namespace ns, and the
// explicit key value if any.
func quotaRefID(field, ns, ref string) (id, key string, explicit bool, err error) {
	id, key, explicit = strings.Cut(ref, "=")
	if !strings.Contains(id, "/") {
		if err := checkResourceName(field, id); err != nil {
			return "", "", false, err
		}
		return QuotaID(ns, id), key, explicit, nil
	}
	if _, _, _, err := splitResourceID(field, id, false); err != nil {
		return "", "", false, err
	}
	return id, key, explicit, nil
}

// deferredKey is the separator of a deferred quota reference,
// "<quota id>?<key path>": a keyed quota of a flow member whose input is an
// upstream's result, unknown at staging. Its key value is read from the
// member's input when the member is first claimed (settleQuotaKeys). Quota
// ids hold no '?' or '=', so the first of the two tells a deferred
// reference from a subject.
const deferredKey = "?"

// deferQuota returns the deferred reference of keyed quota id.
func deferQuota(id, path string) string { return id + deferredKey + path }

// deferredQuota splits a deferred reference; ok is false for a subject.
func deferredQuota(ref string) (id, path string, ok bool) {
	i := strings.IndexAny(ref, "="+deferredKey)
	if i < 0 || ref[i:i+1] != deferredKey {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

// resolveQuota turns a quota reference of an execution of namespace ns
// into a subject. keyField returns the key field of a quota id (ok=false:
// undefined); payload is the input the key value is read from. The
// definition decides: an unkeyed quota has one subject, so a key value
// given for it is refused (it would make a subject with limits of its
// own, outside the quota's cap); a keyed quota always has a key value,
// given explicitly ("<quota>=<key value>") or read from the payload.
func resolveQuota(field, ns, ref string, payload []byte, keyField func(id string) (string, bool)) (string, error) {
	id, key, explicit, err := quotaRefID(field, ns, ref)
	if err != nil {
		return "", err
	}
	path, ok := keyField(id)
	if !ok {
		return "", invalid(field, "quota %s is not defined", id)
	}
	if explicit {
		if path == "" {
			return "", invalid(field, "quota %s is not keyed: %q gives a key value it has no use for; name it without %q", id, ref, "="+key)
		}
		if err := checkToken(field, key, MaxQuotaKeyBytes); err != nil {
			return "", err
		}
		return id + "=" + key, nil
	}
	if path == "" {
		return id, nil
	}
	k, err := extractKey(field, payload, path)
	if err != nil {
		return "", err
	}
	return id + "=" + k, nil
}
