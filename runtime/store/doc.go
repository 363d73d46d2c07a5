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
// The store uses the server's clock (TIME) for every timestamp it writes.
// Times in requests are durations relative to that clock, except
// CreateRequest.DelayUntil, an absolute time chosen by the caller.
package store
