package dashboard

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// PauseMax is the longest pause the limits page offers (the API's own
// bound is seven days).
const PauseMax = 7 * 24 * time.Hour

// limitsData is the limits page: the shared budgets and the quotas the
// served templates declare, and any other asked for by id.
type limitsData struct {
	Budgets []budgetRow
	Quotas  []quotaRow
	// Missing are the declared ones the API does not know (not yet
	// created, or deleted), and the looked-up ids it does not have.
	Missing []string
	Lookup  string
	Notice  string
	Error   string
}

type budgetRow struct {
	B     *wire.Budget
	Flows []string // the templates that count against it
}

type quotaRow struct {
	Q     *wire.Quota
	Flows []string
}

func (d *Dashboard) limits(q *request) (*view, error) {
	return d.showLimits(q, noticeText(q.r.URL.Query().Get("done")), "", 0)
}

// showLimits renders the limits page; refused is why an action was
// refused, answered with status.
func (d *Dashboard) showLimits(q *request, notice, refused string, status int) (*view, error) {
	ts, err := q.api.Templates(q.ctx())
	if err != nil {
		return nil, err
	}
	budgets := map[string][]string{} // id -> flows
	quotas := map[string][]string{}
	for _, t := range ts {
		full, err := q.api.Template(q.ctx(), t.Name)
		if err != nil {
			return nil, err
		}
		if full.Plan == nil {
			continue
		}
		for _, b := range full.Plan.BudgetDefs {
			if b.Scope != plan.ScopeRun {
				id := t.Namespace + "/" + b.Name
				budgets[id] = append(budgets[id], t.Name)
			}
		}
		for _, x := range full.Plan.QuotaDefs {
			id := t.Namespace + "/" + x.Name
			quotas[id] = append(quotas[id], t.Name)
		}
	}
	data := limitsData{Notice: notice, Error: refused, Lookup: strings.TrimSpace(q.r.URL.Query().Get("id"))}
	if data.Lookup != "" {
		// One id may name a budget, a quota or both.
		_, isB := budgets[data.Lookup]
		_, isQ := quotas[data.Lookup]
		found := isB || isQ
		if !isB {
			if _, err := q.api.GetBudget(q.ctx(), data.Lookup); err == nil {
				budgets[data.Lookup], found = nil, true
			} else if !refusedLookup(err) {
				return nil, err
			}
		}
		if !isQ {
			if _, err := q.api.GetQuota(q.ctx(), data.Lookup); err == nil {
				quotas[data.Lookup], found = nil, true
			} else if !refusedLookup(err) {
				return nil, err
			}
		}
		if !found {
			data.Missing = append(data.Missing, data.Lookup)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(budgets)) {
		b, err := q.api.GetBudget(q.ctx(), id)
		switch {
		case notFound(err):
			data.Missing = append(data.Missing, "budget "+id)
		case err != nil:
			return nil, err
		default:
			data.Budgets = append(data.Budgets, budgetRow{B: b, Flows: budgets[id]})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(quotas)) {
		x, err := q.api.GetQuota(q.ctx(), id)
		switch {
		case notFound(err):
			data.Missing = append(data.Missing, "quota "+id)
		case err != nil:
			return nil, err
		default:
			data.Quotas = append(data.Quotas, quotaRow{Q: x, Flows: quotas[id]})
		}
	}
	// No reload: the page holds forms being filled in.
	return &view{page: "limits", title: "Limits", data: data, status: status}, nil
}

// refusedLookup says the API refused a lookup by id as the reader's
// mistake (no such id, or one it cannot be): the id is listed as missing.
func refusedLookup(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

func notFound(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// back is the limits page after an action, keeping a looked-up id.
func back(q *request, done string) *view {
	v := url.Values{"done": {done}}
	if id := strings.TrimSpace(q.r.PostFormValue("lookup")); id != "" {
		v.Set("id", id)
	}
	return &view{redirect: Prefix + "/limits?" + v.Encode()}
}

// limitRefused shows the limits page with why the API refused an action,
// with the API's status: a 4xx is the user's to fix; anything else is the
// page's error.
func (d *Dashboard) limitRefused(q *request, err error) (*view, error) {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status >= 500 {
		return nil, err
	}
	return d.showLimits(q, "", ae.Message, ae.Status)
}

func (d *Dashboard) resetBudget(q *request) (*view, error) {
	if _, err := q.api.ResetBudget(q.ctx(), q.r.PostFormValue("id")); err != nil {
		return d.limitRefused(q, err)
	}
	return back(q, "budget-reset"), nil
}

func (d *Dashboard) pauseQuota(q *request) (*view, error) {
	minutes, err := strconv.ParseFloat(strings.TrimSpace(q.r.PostFormValue("minutes")), 64)
	if err != nil || minutes <= 0 || time.Duration(minutes*float64(time.Minute)) > PauseMax {
		return d.showLimits(q, "", "A pause lasts more than 0 and at most 10080 minutes (seven days).", http.StatusBadRequest)
	}
	req := wire.QuotaPause{Key: q.r.PostFormValue("key"), ForMs: int64(minutes * 60_000),
		Reason: strings.TrimSpace(q.r.PostFormValue("reason"))}
	if req.Reason == "" {
		req.Reason = "paused from the console"
	}
	if _, err := q.api.PauseQuota(q.ctx(), q.r.PostFormValue("id"), req); err != nil {
		return d.limitRefused(q, err)
	}
	return back(q, "quota-paused"), nil
}

func (d *Dashboard) resumeQuota(q *request) (*view, error) {
	if _, err := q.api.ResumeQuota(q.ctx(), q.r.PostFormValue("id"), wire.QuotaResume{Key: q.r.PostFormValue("key")}); err != nil {
		return d.limitRefused(q, err)
	}
	return back(q, "quota-resumed"), nil
}
