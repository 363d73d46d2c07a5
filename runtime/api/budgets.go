package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

func (a *admission) putBudget(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.PutBudget
	if err := Decode(c, a.s.limit(BodyLimitDefault), false, &req); err != nil {
		return err
	}
	id, e := resourceID(req.ID, req.Namespace, req.Name)
	if e != nil {
		return e
	}
	if e := checkBudget(&req); e != nil {
		return e
	}
	b, created, err := a.svc.PutBudget(c.Request().Context(), id, req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, wire.PutBudgetResponse{Budget: *b, Created: created})
}

// checkBudget validates a budget definition before anything is written.
func checkBudget(req *wire.PutBudget) *Error {
	switch req.OnHardLimit {
	case "":
		req.OnHardLimit = plan.OnHardLimitBlock
	case plan.OnHardLimitBlock, plan.OnHardLimitFail:
	default:
		return invalid("on_hard_limit", "%q is neither %q nor %q", req.OnHardLimit, plan.OnHardLimitBlock, plan.OnHardLimitFail)
	}
	if e := checkDuration("reset_ms", req.ResetMs); e != nil {
		return e
	}
	if len(req.Dimensions) == 0 {
		return invalid("dimensions", "at least one dimension is required")
	}
	if len(req.Dimensions) > store.MaxBudgetDimensions {
		return invalid("dimensions", "has %d dimensions, the limit is %d", len(req.Dimensions), store.MaxBudgetDimensions)
	}
	seen := map[string]bool{}
	for i, d := range req.Dimensions {
		f := "dimensions[" + strconv.Itoa(i) + "]"
		if p := store.ResourceNameProblem(d.Name); p != "" {
			return invalid(f+".name", "%s", p)
		}
		if seen[d.Name] {
			return invalid(f+".name", "%q is declared twice", d.Name)
		}
		seen[d.Name] = true
		if d.Hard < 0 {
			return invalid(f+".hard", "%d is negative", d.Hard)
		}
		if d.Soft < 0 {
			return invalid(f+".soft", "%d is negative", d.Soft)
		}
		if d.Hard > 0 && d.Soft > d.Hard {
			return invalid(f+".soft", "%d is above the hard limit %d", d.Soft, d.Hard)
		}
	}
	return nil
}

func (a *admission) getBudget(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathID(c)
	if e != nil {
		return e
	}
	b, err := a.svc.GetBudget(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

// listBudgets serves GET /v1/budgets.
func (a *admission) listBudgets(c echo.Context) error {
	q, e := limitListQuery(c, true)
	if e != nil {
		return e
	}
	out, err := a.svc.ListBudgets(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// budgetAction serves POST /v1/budgets/{id}/reset and /usage.
func (a *admission) budgetAction(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathID(c)
	if e != nil {
		return e
	}
	if rest, ok := strings.CutSuffix(id, "/reset"); ok {
		if err := Decode(c, a.s.limit(BodyLimitDefault), true, &struct{}{}); err != nil {
			return err
		}
		b, err := a.svc.ResetBudget(c.Request().Context(), rest)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, b)
	}
	if rest, ok := strings.CutSuffix(id, "/usage"); ok {
		var req wire.BudgetUsageReport
		if err := Decode(c, a.s.limit(BodyLimitDefault), false, &req); err != nil {
			return err
		}
		if e := checkUsage(req.Dimension, req.Delta, req.DedupKey, false); e != nil {
			return e
		}
		r, err := a.svc.ReportBudgetUsage(c.Request().Context(), rest, req)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, wire.UsageResponse{Results: []wire.UsageResult{*r}})
	}
	return Errorf(http.StatusNotFound, wire.CodeUnknownRoute, "no such route: POST /v1/budgets/{id} takes /reset or /usage")
}

// checkUsage validates a usage report.
func checkUsage(dim string, delta int64, key string, keyRequired bool) *Error {
	if e := checkIdent("dimension", dim, NameMaxBytes, true); e != nil {
		return e
	}
	if delta < 0 || delta > UsageDeltaMax {
		return invalid("delta", "%d is outside 0..%d", delta, UsageDeltaMax)
	}
	if key == "" && !keyRequired {
		return nil
	}
	return checkIdent("dedup_key", key, DedupKeyMaxBytes, false)
}

func (a *admission) executionUsage(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.ExecutionUsageReport
	if err := Decode(c, a.s.limit(BodyLimitDefault), false, &req); err != nil {
		return err
	}
	if e := checkLease("", wire.Lease{ExecutionID: id, LeaseID: req.LeaseID, Epoch: req.Epoch}); e != nil {
		return e
	}
	if e := checkUsage(req.Dimension, req.Delta, req.DedupKey, true); e != nil {
		return e
	}
	res, err := a.svc.ReportExecutionUsage(c.Request().Context(), id, req)
	if err != nil {
		return err
	}
	if res == nil {
		res = []wire.UsageResult{}
	}
	return c.JSON(http.StatusOK, wire.UsageResponse{Results: res})
}
