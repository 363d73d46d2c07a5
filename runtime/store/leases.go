package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// leasesChannel is the pub/sub channel of lease ends, after
// Config.KeyPrefix.
const leasesChannel = "ff:leases"

// LeasesChannel returns the pub/sub channel on which the end of a running
// attempt's lease by anything but its worker's report is published (see
// LeaseEnd).
func (s *Store) LeasesChannel() string { return s.cfg.KeyPrefix + leasesChannel }

// Why a lease ended, in a LeaseEnd.
const (
	LeaseEndCancelled = "cancelled" // the execution, or its run, was cancelled
	LeaseEndRevoked   = "revoked"   // the lease was revoked (RevokeLease, RevokeLeaseOf, RevokeGrants)
	LeaseEndTimeout   = "timeout"   // the attempt's timeout passed
	LeaseEndExpired   = "expired"   // the lease expired
	LeaseEndDeadline  = "deadline"  // the execution's deadline passed
)

// LeaseEnd is one notice of LeasesChannel: the lease of epoch Epoch of
// execution ExecutionID ended, for reason Why (a LeaseEnd… value).
// Messages are "<execution id>:<epoch>:<why>".
//
// The function that ends the lease publishes it, in the same atomic call:
// a cancel of the execution or of its run, a revoke, the attempt timeout,
// lease expiry and deadline scanners, and a fenced call that finds one of
// those limits passed and applies it. The worker's own complete or fail
// publishes nothing, nor does a claim or a renew of a live lease. Pub/sub
// is at most once: a lost notice delays the news until the worker's next
// renew.
type LeaseEnd struct {
	ExecutionID ExecutionID
	Epoch       int64
	Why         string
}

// String returns the message form of e.
func (e LeaseEnd) String() string {
	return string(e.ExecutionID) + ":" + strconv.FormatInt(e.Epoch, 10) + ":" + e.Why
}

// ParseLeaseEnd parses a message published on LeasesChannel.
func ParseLeaseEnd(msg string) (LeaseEnd, error) {
	id, rest, ok1 := strings.Cut(msg, ":")
	epoch, why, ok2 := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(epoch, 10, 64)
	if !ok1 || !ok2 || err != nil || n < 1 || why == "" {
		return LeaseEnd{}, fmt.Errorf("store: malformed lease end message %q", msg)
	}
	eid, err := ParseExecutionID(id)
	if err != nil {
		return LeaseEnd{}, fmt.Errorf("store: malformed lease end message %q: %w", msg, err)
	}
	return LeaseEnd{ExecutionID: eid, Epoch: n, Why: why}, nil
}

// CheckLeases reports, without changing anything, which of leases are
// still held: errs[i] is nil while leases[i] is its execution's current
// lease and none of its limits passed, else the error Renew would give (a
// *LeaseError, or one matching ErrNotFound). A limit found passed is
// reported (LeaseReasonExpired, LeaseReasonTimedOut, LeaseReasonDeadline,
// with the state the record still has), not applied: its scanner, or the
// worker's next fenced call, applies it. One read-only FCALL per
// partition, pipelined; err is for transport failures and a batch over
// MaxBatch only.
func (s *Store) CheckLeases(ctx context.Context, leases []Lease) (errs []error, err error) {
	if len(leases) > MaxBatch {
		return nil, invalid("leases", "%d leases, at most %d per call", len(leases), MaxBatch)
	}
	errs = make([]error, len(leases))
	b := &batch{}
	for i, l := range leases {
		p, uuid, err := s.locate(l.ExecutionID)
		if err != nil {
			errs[i] = err
			continue
		}
		b.add(p, "ff_lease_check", nil, i, uuid, l.ID, strconv.FormatInt(l.Epoch, 10))
	}
	err = s.run(ctx, b, func(pos int, _ []valkey.ValkeyMessage, ref *refusal) {
		if ref != nil {
			errs[pos] = refusalError(ref, leases[pos].ExecutionID, "check")
		}
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}
