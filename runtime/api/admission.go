package api

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// AdmissionService manages budgets, quotas, usage reports and the worker
// registry. The API validates requests before calling it; errors should be
// *Error values, as for Service.
type AdmissionService interface {
	// PutBudget creates a shared budget or replaces its definition, keeping
	// its usage; created is false for a replacement.
	PutBudget(ctx context.Context, id string, req wire.PutBudget) (b *wire.Budget, created bool, err error)
	GetBudget(ctx context.Context, id string) (*wire.Budget, error)
	// ListBudgets returns one page of every budget, shared and
	// run-scoped, ordered by id; each as GetBudget returns it.
	ListBudgets(ctx context.Context, q LimitListQuery) (*wire.BudgetList, error)
	ResetBudget(ctx context.Context, id string) (*wire.Budget, error)
	// ReportBudgetUsage reports usage straight to one budget.
	ReportBudgetUsage(ctx context.Context, id string, req wire.BudgetUsageReport) (*wire.UsageResult, error)
	// ReportExecutionUsage reports usage of a running attempt, after
	// checking that the lease is the execution's current, unexpired one and
	// that neither the attempt's timeout nor the execution's deadline has
	// passed (a stale lease is an *Error with code wire.CodeStaleLease).
	ReportExecutionUsage(ctx context.Context, id string, req wire.ExecutionUsageReport) ([]wire.UsageResult, error)
	PutQuota(ctx context.Context, id string, req wire.PutQuota) (q *wire.Quota, created bool, err error)
	// GetQuota returns a quota with every subject, or only the subject of
	// key value *key ("" for an unkeyed quota) when key is set.
	GetQuota(ctx context.Context, id string, key *string) (*wire.Quota, error)
	// ListQuotas returns one page of every quota ordered by id; each as
	// GetQuota returns it, but with the first 20 subjects of a keyed
	// quota and SubjectsMore counting the others (q.Scope is empty).
	ListQuotas(ctx context.Context, q LimitListQuery) (*wire.QuotaList, error)
	// PauseQuota pauses admissions under a subject of quota id until
	// req.Until (or for req.ForMs from Valkey's clock); ResumeQuota ends a
	// pause. Both answer the quota with that subject only.
	PauseQuota(ctx context.Context, id string, req wire.QuotaPause) (*wire.Quota, error)
	ResumeQuota(ctx context.Context, id string, req wire.QuotaResume) (*wire.Quota, error)
	// Heartbeat registers or refreshes a worker instance; a new one makes
	// the namespace's executions it can run eligible again at once.
	Heartbeat(ctx context.Context, req wire.WorkerHeartbeat) (*wire.WorkerHeartbeatResponse, error)
	Workers(ctx context.Context, namespace string) (*wire.WorkerList, error)
}

// Limits of the admission routes.
const (
	// ResourceIDMaxBytes bounds a budget or quota id.
	ResourceIDMaxBytes = store.MaxResourceIDBytes
	// UsageDeltaMax bounds one usage report's delta.
	UsageDeltaMax = int64(1) << 53
	// DedupKeyMaxBytes bounds a usage report's dedup key.
	DedupKeyMaxBytes = 256
	// LimitListDef is the page size of GET /v1/budgets and /v1/quotas
	// without a limit; LimitListMax bounds it.
	LimitListDef = store.LimitListDefault
	LimitListMax = store.LimitListMax
	// LimitCursorMaxBytes bounds the cursor of those listings.
	LimitCursorMaxBytes = 1024
)

// LimitListQuery is a validated GET /v1/budgets or /v1/quotas: empty
// fields do not filter.
type LimitListQuery struct {
	Namespace string // only the ids "<namespace>/<name>" of this namespace
	Scope     string // budgets only: plan.ScopeShared or plan.ScopeRun
	Cursor    string // next_cursor of the previous page
	Limit     int    // 1..LimitListMax
}

// limitListQuery reads the query of GET /v1/budgets (withScope) or
// /v1/quotas.
func limitListQuery(c echo.Context, withScope bool) (LimitListQuery, *Error) {
	allowed := []string{"namespace", "cursor", "limit"}
	if withScope {
		allowed = append(allowed, "scope")
	}
	if e := onlyQuery(c, allowed...); e != nil {
		return LimitListQuery{}, e
	}
	q := LimitListQuery{Namespace: c.QueryParam("namespace"), Scope: c.QueryParam("scope"),
		Cursor: c.QueryParam("cursor"), Limit: LimitListDef}
	if vs, ok := c.QueryParams()["limit"]; ok {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 || n > LimitListMax {
			return q, invalid("limit", "%q is not an integer in 1..%d", vs[0], LimitListMax)
		}
		q.Limit = n
	}
	if q.Namespace != "" { // empty is none, as on every route (Conventions)
		if e := checkName("namespace", q.Namespace); e != nil {
			return q, e
		}
	}
	switch q.Scope {
	case "", plan.ScopeShared, plan.ScopeRun:
	default:
		return q, invalid("scope", "%q is neither %q nor %q", q.Scope, plan.ScopeShared, plan.ScopeRun)
	}
	if q.Cursor != "" {
		if e := checkIdent("cursor", q.Cursor, LimitCursorMaxBytes, false); e != nil {
			return q, e
		}
	}
	return q, nil
}

// admission serves /v1/budgets, /v1/quotas, /v1/workers and
// /v1/executions/{id}/usage.
type admission struct {
	s   *Server
	svc AdmissionService
}

// AddAdmission serves the budget, quota, usage and worker routes over svc,
// behind the same auth as every /v1 route. Call it once, before serving.
func (s *Server) AddAdmission(svc AdmissionService) error {
	if svc == nil {
		return errors.New("api: AddAdmission: nil AdmissionService")
	}
	a := &admission{s: s, svc: svc}
	v1 := s.V1()
	v1.PUT("/budgets", a.putBudget)
	v1.POST("/budgets", a.putBudget)
	// Budget and quota ids hold '/' ("default/gpu"): the id is the rest of
	// the path (or one escaped segment), actions are a trailing segment.
	v1.GET("/budgets", a.listBudgets)
	v1.GET("/budgets/*", a.getBudget)
	v1.POST("/budgets/*", a.budgetAction)
	v1.PUT("/quotas", a.putQuota)
	v1.POST("/quotas", a.putQuota)
	v1.GET("/quotas", a.listQuotas)
	v1.GET("/quotas/*", a.getQuota)
	v1.POST("/quotas/*", a.quotaAction)
	v1.POST("/executions/:id/usage", a.executionUsage)
	v1.POST("/workers/heartbeat", a.heartbeat)
	v1.GET("/workers", a.workers)
	return nil
}

// pathID is the wildcard part of the route, unescaped (pathParam).
func pathID(c echo.Context) (string, *Error) {
	id, e := pathParam(c, "*", "id")
	if e != nil {
		return "", e
	}
	if e := checkIdent("id", id, ResourceIDMaxBytes, false); e != nil {
		return "", e
	}
	return id, nil
}

// resourceID works out the id of a PUT body: id, or namespace and name.
func resourceID(id, ns, name string) (string, *Error) {
	if id != "" {
		if ns != "" || name != "" {
			return "", invalid("id", "give either id or namespace and name, not both")
		}
		if e := checkIdent("id", id, ResourceIDMaxBytes, false); e != nil {
			return "", e
		}
		i := strings.LastIndexByte(id, '/')
		if i <= 0 || i == len(id)-1 {
			return "", invalid("id", "%q is not <namespace>/<name>", id)
		}
		if e := checkName("id", id[:i]); e != nil {
			return "", e
		}
		if e := checkResourceName("id", id[i+1:]); e != nil {
			return "", e
		}
		return id, nil
	}
	ns = cmp.Or(ns, plan.DefaultNamespace)
	if e := checkName("namespace", ns); e != nil {
		return "", e
	}
	if name == "" {
		return "", invalid("name", "is required (or give id)")
	}
	if e := checkResourceName("name", name); e != nil {
		return "", e
	}
	return ns + "/" + name, nil
}

// checkResourceName checks the name of a budget or quota, given alone or
// as the part of an id after its last '/'.
func checkResourceName(field, name string) *Error {
	if strings.ContainsAny(name, "/@=") {
		return invalid(field, "%q must not contain '/', '@' or '='", name)
	}
	return checkName(field, name)
}
