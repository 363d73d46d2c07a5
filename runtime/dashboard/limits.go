package dashboard

import (
	"errors"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/utf8cut"
	"github.com/flowfabric/ff/runtime/wire"
)

// PauseMax is the longest pause the limits page offers (the API's own
// bound is seven days).
const PauseMax = 7 * 24 * time.Hour

// LimitsShown is the page size of the budget and quota lists of the
// limits page; a "more" link shows the next page.
const LimitsShown = 100

// limitsData is the limits page: a page of every budget and of every quota
// (GET /v1/budgets, /v1/quotas), marked with the templates that declare
// them, and any one asked for by id.
type limitsData struct {
	Budgets []budgetRow
	Quotas  []quotaRow
	// Missing are the declared ones the API does not know (not yet
	// created, or deleted), and the looked-up ids it does not have.
	Missing   []string
	Lookup    string
	Namespace string   // the namespace filter of both lists ("" = all)
	Scope     string   // the scope filter of the budgets ("" = both)
	Scopes    []string // to choose from
	// The lists' other pages, as page URLs ("" = none): the next one, and
	// the first one when on a later page.
	BudgetsNext, BudgetsFirst string
	QuotasNext, QuotasFirst   string
	// View is the page's query, which the forms send back so that the page
	// they return to shows the same lists.
	View   string
	Notice string
	Error  string
}

type budgetRow struct {
	B      *wire.Budget
	Flows  []string // the templates that count against it
	Looked bool     // the one looked up by id, shown first
}

type quotaRow struct {
	Q      *wire.Quota
	Flows  []string
	Looked bool
}

// limitsParams are the query parameters of the limits page that choose
// what it lists.
var limitsParams = []string{"id", "namespace", "scope", "budgets_cursor", "quotas_cursor"}

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
	budgets := map[string][]string{} // declared id -> flows
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
	// A form's POST carries the page's query in "view"; a GET has it.
	v := q.r.URL.Query()
	if q.r.Method == http.MethodPost {
		v, _ = url.ParseQuery(q.r.PostFormValue("view"))
		if id := q.r.PostFormValue("lookup"); id != "" {
			v.Set("id", id)
		}
	}
	shown := url.Values{}
	for _, k := range limitsParams {
		if x := strings.TrimSpace(v.Get(k)); x != "" {
			shown.Set(k, x)
		}
	}
	data := limitsData{Notice: notice, Error: refused, Lookup: shown.Get("id"), Namespace: shown.Get("namespace"),
		Scope: shown.Get("scope"), Scopes: []string{plan.ScopeShared, plan.ScopeRun}, View: shown.Encode()}
	// A filter or cursor the API refuses is the reader's to fix.
	refuse := func(err error) error {
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status >= 500 {
			return err
		}
		data.Error, status = ae.Message, ae.Status
		return nil
	}
	lo := client.LimitListOptions{Namespace: data.Namespace, Scope: data.Scope, Cursor: shown.Get("budgets_cursor"), Limit: LimitsShown}
	if bl, err := q.api.ListBudgets(q.ctx(), lo); err != nil {
		if err := refuse(err); err != nil {
			return nil, err
		}
	} else {
		for i := range bl.Budgets {
			b := &bl.Budgets[i]
			data.Budgets = append(data.Budgets, budgetRow{B: b, Flows: budgets[b.ID]})
		}
		data.BudgetsNext, data.BudgetsFirst = pageURLs(shown, "budgets_cursor", lo.Cursor, bl.NextCursor)
	}
	lo = client.LimitListOptions{Namespace: data.Namespace, Cursor: shown.Get("quotas_cursor"), Limit: LimitsShown}
	if ql, err := q.api.ListQuotas(q.ctx(), lo); err != nil {
		if err := refuse(err); err != nil {
			return nil, err
		}
	} else {
		for i := range ql.Quotas {
			x := &ql.Quotas[i]
			data.Quotas = append(data.Quotas, quotaRow{Q: x, Flows: quotas[x.ID]})
		}
		data.QuotasNext, data.QuotasFirst = pageURLs(shown, "quotas_cursor", lo.Cursor, ql.NextCursor)
	}
	listedB := func(id string) bool {
		return slices.ContainsFunc(data.Budgets, func(r budgetRow) bool { return r.B.ID == id })
	}
	listedQ := func(id string) bool {
		return slices.ContainsFunc(data.Quotas, func(r quotaRow) bool { return r.Q.ID == id })
	}
	// The looked-up id, first and in full (a listing cuts a keyed quota's
	// key values): it may name a budget, a quota or both, on a page not
	// shown.
	if id := data.Lookup; id != "" {
		found := false
		if b, err := q.api.GetBudget(q.ctx(), id); err == nil {
			data.Budgets = slices.DeleteFunc(data.Budgets, func(r budgetRow) bool { return r.B.ID == id })
			data.Budgets, found = slices.Insert(data.Budgets, 0, budgetRow{B: b, Flows: budgets[id], Looked: true}), true
		} else if !refusedLookup(err) {
			return nil, err
		}
		if x, err := q.api.GetQuota(q.ctx(), id); err == nil {
			data.Quotas = slices.DeleteFunc(data.Quotas, func(r quotaRow) bool { return r.Q.ID == id })
			data.Quotas, found = slices.Insert(data.Quotas, 0, quotaRow{Q: x, Flows: quotas[id], Looked: true}), true
		} else if !refusedLookup(err) {
			return nil, err
		}
		if !found {
			data.Missing = append(data.Missing, id)
		}
	}
	// The declared ones not listed here may be on another page, or not
	// exist: those are named.
	for _, id := range slices.Sorted(maps.Keys(budgets)) {
		if listedB(id) {
			continue
		}
		if _, err := q.api.GetBudget(q.ctx(), id); notFound(err) {
			data.Missing = append(data.Missing, "budget "+id)
		} else if err != nil {
			return nil, err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(quotas)) {
		if listedQ(id) {
			continue
		}
		if _, err := q.api.GetQuota(q.ctx(), id); notFound(err) {
			data.Missing = append(data.Missing, "quota "+id)
		} else if err != nil {
			return nil, err
		}
	}
	// No reload: the page holds forms being filled in.
	return &view{page: "limits", title: "Limits", data: data, status: status}, nil
}

// pageURLs are the URLs of the next page of one list of the limits page
// (at cursor next) and of its first page (when on a later one, at
// cursor), keeping the rest of the page's query.
func pageURLs(shown url.Values, param, cursor, next string) (nextURL, firstURL string) {
	at := func(c string) string {
		v := maps.Clone(shown)
		v.Del(param)
		if c != "" {
			v.Set(param, c)
		}
		if len(v) == 0 {
			return Prefix + "/limits"
		}
		return Prefix + "/limits?" + v.Encode()
	}
	if next != "" {
		nextURL = at(next)
	}
	if cursor != "" {
		firstURL = at("")
	}
	return nextURL, firstURL
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

// back is the limits page after an action, showing what the page showed
// (its query, sent back as "view"; "lookup": a looked-up id).
func back(q *request, done string) *view {
	old, _ := url.ParseQuery(q.r.PostFormValue("view"))
	v := url.Values{}
	for _, k := range limitsParams {
		if x := strings.TrimSpace(old.Get(k)); x != "" {
			v.Set(k, x)
		}
	}
	if id := strings.TrimSpace(q.r.PostFormValue("lookup")); id != "" {
		v.Set("id", id)
	}
	v.Set("done", done)
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

// budgetResetData is the page that asks before a budget is reset.
type budgetResetData struct {
	B    *wire.Budget
	View string       // the limits page's query, sent back with the reset
	Back template.URL // that page
}

// confirmReset asks before a budget's usage is zeroed, on a page of its
// own.
func (d *Dashboard) confirmReset(q *request) (*view, error) {
	b, err := q.api.GetBudget(q.ctx(), q.r.URL.Query().Get("id"))
	if err != nil {
		return nil, err
	}
	from := q.r.URL.Query().Get("view")
	old, _ := url.ParseQuery(from)
	v := url.Values{}
	for _, k := range limitsParams {
		if x := strings.TrimSpace(old.Get(k)); x != "" {
			v.Set(k, x)
		}
	}
	back := Prefix + "/limits"
	if len(v) > 0 {
		back += "?" + v.Encode()
	}
	return &view{page: "budget_reset", title: "Reset budget " + b.ID,
		data: budgetResetData{B: b, View: from, Back: template.URL(back)}}, nil // encoded: safe
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
		Reason: utf8cut.Cut(strings.TrimSpace(q.r.PostFormValue("reason")), api.PauseReasonMaxBytes)}
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
