package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/flowfabric/ff/runtime/wire"
)

// PutBudget creates a shared budget or replaces its definition; an
// existing budget keeps its usage. created is false for a replacement.
func (c *Client) PutBudget(ctx context.Context, req wire.PutBudget) (b *wire.Budget, created bool, err error) {
	var out wire.PutBudgetResponse
	if err := c.do(ctx, http.MethodPut, "/v1/budgets", nil, req, &out); err != nil {
		return nil, false, err
	}
	return &out.Budget, out.Created, nil
}

// GetBudget returns a budget's usage, limits, breaches and next reset. Ids
// are "<namespace>/<name>" (run-scoped: "<namespace>/<name>@<run id>").
func (c *Client) GetBudget(ctx context.Context, id string) (*wire.Budget, error) {
	var out wire.Budget
	if err := c.do(ctx, http.MethodGet, "/v1/budgets/"+escapeID(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LimitListOptions filter and page ListBudgets and ListQuotas. Empty
// fields do not filter.
type LimitListOptions struct {
	Namespace string // only the ids "<namespace>/<name>" of this namespace
	Scope     string // ListBudgets only: "shared" or "run"
	Cursor    string // NextCursor of the previous page
	Limit     int    // page size, at most 1000; 0 = the server's default (100)
}

func (o LimitListOptions) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": o.Namespace, "scope": o.Scope, "cursor": o.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// ListBudgets returns one page of budgets, shared and run-scoped, ordered
// by id. A page may hold fewer budgets than the limit, even none, and
// still have a NextCursor: the server applies the filters as it reads its
// indexes, a bounded number of entries per request. Pass NextCursor back
// until it is empty.
func (c *Client) ListBudgets(ctx context.Context, o LimitListOptions) (*wire.BudgetList, error) {
	var out wire.BudgetList
	if err := c.do(ctx, http.MethodGet, "/v1/budgets", o.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetBudget zeroes a budget's usage; executions waiting for it become
// eligible again.
func (c *Client) ResetBudget(ctx context.Context, id string) (*wire.Budget, error) {
	var out wire.Budget
	if err := c.do(ctx, http.MethodPost, "/v1/budgets/"+escapeID(id)+"/reset", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportBudgetUsage reports usage straight to one budget (operators; a
// worker reports through its task, worker.Task.ReportUsage).
func (c *Client) ReportBudgetUsage(ctx context.Context, id string, req wire.BudgetUsageReport) (*wire.UsageResult, error) {
	var out wire.UsageResponse
	if err := c.do(ctx, http.MethodPost, "/v1/budgets/"+escapeID(id)+"/usage", nil, req, &out); err != nil {
		return nil, err
	}
	if len(out.Results) == 0 {
		return &wire.UsageResult{BudgetID: id}, nil
	}
	return &out.Results[0], nil
}

// ReportExecutionUsage reports usage of a running attempt under its lease
// (409 stale_lease when the lease is no longer the execution's).
func (c *Client) ReportExecutionUsage(ctx context.Context, executionID string, req wire.ExecutionUsageReport) ([]wire.UsageResult, error) {
	var out wire.UsageResponse
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(executionID)+"/usage", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// PutQuota creates a quota or replaces its definition.
func (c *Client) PutQuota(ctx context.Context, req wire.PutQuota) (q *wire.Quota, created bool, err error) {
	var out wire.PutQuotaResponse
	if err := c.do(ctx, http.MethodPut, "/v1/quotas", nil, req, &out); err != nil {
		return nil, false, err
	}
	return &out.Quota, out.Created, nil
}

// GetQuota returns a quota's limits and, per key value for a keyed quota,
// its window and active counts.
func (c *Client) GetQuota(ctx context.Context, id string) (*wire.Quota, error) {
	var out wire.Quota
	if err := c.do(ctx, http.MethodGet, "/v1/quotas/"+escapeID(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListQuotas returns one page of quotas ordered by id, as ListBudgets
// does (o.Scope must be empty).
func (c *Client) ListQuotas(ctx context.Context, o LimitListOptions) (*wire.QuotaList, error) {
	var out wire.QuotaList
	if err := c.do(ctx, http.MethodGet, "/v1/quotas", o.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseQuota pauses admissions under a subject of quota id (req.Key for a
// keyed quota) until req.Until, or for req.ForMs: executions that need it
// wait, with the pause's end and reason as their blocking detail. It
// answers the quota with the pause.
func (c *Client) PauseQuota(ctx context.Context, id string, req wire.QuotaPause) (*wire.Quota, error) {
	var out wire.Quota
	if err := c.do(ctx, http.MethodPost, "/v1/quotas/"+escapeID(id)+"/pause", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeQuota ends a pause of a subject of quota id now.
func (c *Client) ResumeQuota(ctx context.Context, id string, req wire.QuotaResume) (*wire.Quota, error) {
	var out wire.Quota
	if err := c.do(ctx, http.MethodPost, "/v1/quotas/"+escapeID(id)+"/resume", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Heartbeat registers (connects) or refreshes a worker instance with its
// capabilities; a bad capability is a 400 validation_failed.
func (c *Client) Heartbeat(ctx context.Context, req wire.WorkerHeartbeat) (*wire.WorkerHeartbeatResponse, error) {
	var out wire.WorkerHeartbeatResponse
	if err := c.do(ctx, http.MethodPost, "/v1/workers/heartbeat", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Workers lists the connected workers of a namespace ("" = default) with
// their capabilities, lanes and active leases.
func (c *Client) Workers(ctx context.Context, namespace string) (*wire.WorkerList, error) {
	var q url.Values
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	var out wire.WorkerList
	if err := c.do(ctx, http.MethodGet, "/v1/workers", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
