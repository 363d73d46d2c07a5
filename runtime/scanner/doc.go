// Package scanner runs the background scanners of ffrun: lease expiry,
// delayed promotion, attempt timeout, execution deadline, retention of
// terminal executions and flow runs, unblocking of executions that wait
// for a capable worker, a budget or a quota, scheduled budget resets, the
// release and reconciliation of quota slots, and the record of the
// Functions library version in use (which deletes idle versions).
//
// Each scanner lives in its own file with the same shape: a Config with
// defaults and validation, a constructor, and Start/Stop that are safe to
// call twice. On every tick a scanner makes one bounded store call per flow
// partition (budget reset: per budget partition; quota reconcile: per quota
// partition; library: one call) (store.Store.ExpireLeases and friends); each call re-checks what
// it changes inside one FCALL, so several ffrun processes may run the same
// scanners at once. When a partition had more due work than the limit, the
// next tick comes early (CatchUpInterval, or the interval when that is
// shorter) instead of after the full interval.
package scanner
