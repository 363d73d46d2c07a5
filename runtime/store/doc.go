// Package store is the one package of FlowFabric that talks to Valkey.
//
// It owns the key schema, the partitioning of executions, the loading of the
// Lua Functions library (package lua) and the typed FCALL methods the rest of
// the runtime calls. Every state change is one FCALL that validates before it
// writes; Go never reads, modifies and writes state across commands. Lua
// replies use one envelope (see spec/runtime.md) that a single helper maps to
// the typed errors of this package.
//
// Executions live in flow partitions: every key of an execution carries the
// hash tag "{fp:N}" of its partition, and its id encodes N ("N.<uuid>"), so
// any call routes by id alone. Budgets ("{b:M}") and quotas ("{q:K}") have
// partition families of their own. The partition counts are fixed for the
// life of a deployment: Open stores them at first start and refuses another
// start with different counts.
//
// Admission spans partitions, so it is a sequence of FCALLs that cannot
// grant what it should not and cannot leak a quota slot: ClaimAdmitted is
// the scheduler's grant cycle (budgets at a hard limit block or fail
// candidates inside the claim; quota subjects admit each attempt on their
// own partition first; unused admissions are given back), attempts that end
// queue the release of their slots in the same FCALL (DrainQuotaReleases),
// and ReconcileQuotaSlots frees slots whose holder is not running.
//
// The store uses the server's clock (TIME) for every timestamp it writes.
// Times in requests are durations relative to that clock, except
// CreateRequest.DelayUntil, an absolute time chosen by the caller.
package store
