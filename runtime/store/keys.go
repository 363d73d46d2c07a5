package store

import (
	"strconv"
)

// Key schema (spec/runtime.md, "Keys"). B is "<prefix>ff:{fp:N}", the base
// of every key of flow partition N; the Lua library derives the same keys
// from the anchor key B:lanes, which is KEYS[1] of every partition call.
//
//	<prefix>ff:config                    HASH   deployment settings (partition counts; limits_indexed:
//	                                            the budget and quota indexes were backfilled)
//	<prefix>ff:limits_backfill           STRING the lock of a backfill pass (PX)
//	B:lanes                              SET    "<ns>:<lane>" pairs of the lanes holding work on the
//	                                            partition (ff_prune_lanes drops those left empty)
//	B:lanes:sweep                        STRING the SSCAN cursor of ff_prune_lanes' pass
//	B:route:<ns>                         SET    lanes of the namespace whose blocked index may hold
//	                                            entries (the lanes ff_unblock_route reads)
//	B:route:sweep                        STRING the SSCAN cursor of ff_unblock_route's pass over B:lanes
//	B:x:<uuid>                           HASH   execution record, payload, result and
//	                                            attempt history ("att:<n>", "att:<n>:end")
//	B:idem:<ns>:<key>                    STRING idempotency key -> uuid (PX)
//	B:q:<ns>:<lane>:eligible             ZSET   eligible; score = priority then age
//	B:q:<ns>:<lane>:delayed              ZSET   delayed; score = due ms
//	B:q:<ns>:<lane>:terminal             ZSET   finished; score = end ms (a flow member whose run is kept: pushed back by retention)
//	B:q:<ns>:<lane>:pending              ZSET   flows: waiting for upstreams (issue 4)
//	B:q:<ns>:<lane>:blocked              ZSET   waiting for a capable worker; score = block ms
//	                                            (a claim) or recheck ms (ff_block)
//	B:q:<ns>:<lane>:blocked_budget       ZSET   waiting for a budget; score = recheck ms
//	B:q:<ns>:<lane>:blocked_quota        ZSET   waiting for a quota; score = recheck ms
//	B:leases                             ZSET   running; score = lease expiry ms
//	B:timeouts                           ZSET   running with an attempt timeout; score = due ms
//	B:deadlines                          ZSET   non-terminal with a deadline; score = due ms
//	B:f:<uuid>                           HASH   flow run record
//	B:f:<uuid>:nodes                     HASH   exec name -> execution uuid
//	B:f:<uuid>:order                     STRING the run's members in flow order: "<name>=<uuid>,…"
//	B:f:<uuid>:failed                    SET    uuids of the members that failed, expired or were cancelled
//	B:f:<uuid>:staged                    SET    members of a chunked staging not committed yet
//	B:staging                            ZSET   uncommitted chunked stagings; score = deadline ms
//	B:fidem:<ns>:<key>                   STRING run idempotency key -> run uuid (PX)
//	B:runs:ns:<ns>                       ZSET   the namespace's runs; score = staging ms (listings)
//	B:runs:ended                         ZSET   ended runs; score = end ms
//	B:runs:purging                       ZSET   runs retention is deleting (members left)
//	B:f:<uuid>:purge                     HASH   the node map of a run being deleted
//	B:usagefence:<uuid>:<dedup key>      STRING a usage report the fence accepted (PX, ff_usage_fence)
//	<prefix>ff:{w:<ns>}:workers          ZSET   connected worker instances; score = expiry ms
//	<prefix>ff:{w:<ns>}:worker:<inst>    HASH   worker id, lanes, capabilities, times (PEXPIREAT)
//	<prefix>ff:namespaces                SET    namespaces with connected workers (unblock scanner;
//	                                            PruneNamespaces drops those without)
//	<prefix>ff:ui:revoked:<id>           STRING a console session signed out of (PXAT its expiry)

// Index names within a lane.
const (
	indexEligible = "eligible"
	indexDelayed  = "delayed"
	indexActive   = "active" // no key: listings read B:leases for it
	indexTerminal = "terminal"
	indexPending  = "pending"
	indexBlocked  = "blocked" // waiting for a capable worker
	// Budget and quota blocks have indexes of their own, so the unblock
	// scans of one reason never wade through another's.
	indexBlockedBudget = "blocked_budget"
	indexBlockedQuota  = "blocked_quota"
)

type keys struct {
	prefix  string
	anchors []string // anchor(p) of every flow partition, written once (newKeys)
}

// newKeys returns the keys of prefix, with the anchors of partitions
// flow partitions made once: every partition call names one.
func newKeys(prefix string, partitions int) keys {
	k := keys{prefix: prefix}
	k.anchors = make([]string, partitions)
	for p := range k.anchors {
		k.anchors[p] = k.base(p) + ":lanes"
	}
	return k
}

func (k keys) config() string { return k.prefix + "ff:config" }

// libraries records the use of each library version (see KeepLibrary).
func (k keys) libraries() string { return k.prefix + "ff:libraries" }

func (k keys) base(p int) string { return k.prefix + "ff:{fp:" + strconv.Itoa(p) + "}" }

// anchor is KEYS[1] of every partition function.
func (k keys) anchor(p int) string {
	if p >= 0 && p < len(k.anchors) {
		return k.anchors[p]
	}
	return k.base(p) + ":lanes"
}

func (k keys) core(p int, uuid string) string { return k.base(p) + ":x:" + uuid }

func (k keys) idem(p int, ns, key string) string { return k.base(p) + ":idem:" + ns + ":" + key }

func (k keys) lane(p int, ns, lane, index string) string {
	return k.base(p) + ":q:" + ns + ":" + lane + ":" + index
}

func (k keys) leases(p int) string    { return k.base(p) + ":leases" }
func (k keys) timeouts(p int) string  { return k.base(p) + ":timeouts" }
func (k keys) deadlines(p int) string { return k.base(p) + ":deadlines" }

// run is the record of flow run uuid on partition p; run+":nodes" maps
// exec names to execution uuids.
func (k keys) run(p int, uuid string) string { return k.base(p) + ":f:" + uuid }

// runIdem maps a run idempotency key of namespace ns to the run's uuid.
func (k keys) runIdem(p int, ns, key string) string { return k.base(p) + ":fidem:" + ns + ":" + key }

// Worker registry keys: per namespace, on their own hash tag {w:<ns>}.
func (k keys) workers(ns string) string { return k.prefix + "ff:{w:" + ns + "}:workers" }

func (k keys) worker(ns, instance string) string {
	return k.prefix + "ff:{w:" + ns + "}:worker:" + instance
}

// namespaces is the set of namespaces that ever had a connected worker.
func (k keys) namespaces() string { return k.prefix + "ff:namespaces" }

// revokedSession is a web console session signed out of before its expiry.
func (k keys) revokedSession(id string) string { return k.prefix + "ff:ui:revoked:" + id }

// Budget and quota keys (spec/runtime.md, "Budgets and quotas"). A budget
// or quota lives on the partition of the hash of its id.
//
//	<prefix>ff:{b:M}:budget:<id>             HASH   budget definition and breach counters
//	<prefix>ff:{b:M}:budget:<id>:usage       HASH   dimension -> usage
//	<prefix>ff:{b:M}:usagededup:<id>:<key>   STRING usage report dedup (PX)
//	<prefix>ff:{b:M}:breached                HASH   id -> budget at a hard limit
//	<prefix>ff:{b:M}:breached:version        STRING moved by every change of breached but a usage rewrite
//	<prefix>ff:{b:M}:resets                  ZSET   id -> next scheduled reset
//	<prefix>ff:{b:M}:budgets                 ZSET   ids of the partition's budgets, score 0 (ListBudgets)
//	<prefix>ff:{b:M}:budgets:sweep           STRING where the index sweep of ff_budget_resets stopped
//	<prefix>ff:{q:K}:quota:<id>              HASH   quota definition
//	<prefix>ff:{q:K}:quota:<id>:keys         SET    key values seen (keyed quotas)
//	<prefix>ff:{q:K}:quota:<subject>:window  ZSET   admissions in the window
//	<prefix>ff:{q:K}:quota:<subject>:slots   ZSET   concurrency slots held
//	<prefix>ff:{q:K}:subjects                SET    subjects that had admissions
//	<prefix>ff:{q:K}:quotas                  ZSET   ids of the partition's quotas, score 0 (ListQuotas)
//	B:qrelease                               ZSET   quota slots owed a release

func (k keys) budgetBase(m int) string { return k.prefix + "ff:{b:" + strconv.Itoa(m) + "}" }
func (k keys) budget(m int, id string) string {
	return k.budgetBase(m) + ":budget:" + id
}
func (k keys) usageDedup(m int, id, key string) string {
	return k.budgetBase(m) + ":usagededup:" + id + ":" + key
}
func (k keys) breached(m int) string { return k.budgetBase(m) + ":breached" }
func (k keys) resets(m int) string   { return k.budgetBase(m) + ":resets" }

// budgetIndex is budget partition m's index: the ids of its budgets.
func (k keys) budgetIndex(m int) string { return k.budgetBase(m) + ":budgets" }

func (k keys) quotaBase(q int) string { return k.prefix + "ff:{q:" + strconv.Itoa(q) + "}" }
func (k keys) quota(q int, id string) string {
	return k.quotaBase(q) + ":quota:" + id
}
func (k keys) subjects(q int) string { return k.quotaBase(q) + ":subjects" }

// quotaIndex is quota partition q's index: the ids of its quotas.
func (k keys) quotaIndex(q int) string { return k.quotaBase(q) + ":quotas" }

// qrelease is flow partition p's queue of quota slots owed a release.
func (k keys) qrelease(p int) string { return k.base(p) + ":qrelease" }
