package compiler

import (
	"cmp"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// checkBudget compiles a budget declaration.
func (c *checker) checkBudget(bd *dsl.BudgetDecl) {
	b := &plan.Budget{Name: bd.Name.Name, Dimensions: []plan.Dimension{}, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared}
	seen := c.newSeen()
	dims := map[string]*dsl.Ident{}
	for _, it := range bd.Items {
		switch {
		case it.Dimension != nil:
			d := it.Dimension
			if prev, ok := dims[d.Name.Name]; ok {
				c.diags.Errorf(d.Name.Range(), dsl.CodeDuplicate, "dimension %q is already declared in budget %q", d.Name.Name, b.Name).
					With(prev.Range(), "previous declaration here")
				continue
			}
			dims[d.Name.Name] = d.Name
			if len(d.Name.Name) > plan.MaxResourceNameLen {
				c.diags.Errorf(d.Name.Range(), dsl.CodeBadName, "dimension name is %d bytes long; the limit is %d", len(d.Name.Name), plan.MaxResourceNameLen)
			}
			if len(b.Dimensions) == plan.MaxDimensions {
				c.diags.Errorf(d.Name.Range(), dsl.CodeBudgetLimits, "dimension %q is one too many: a budget has at most %d dimensions", d.Name.Name, plan.MaxDimensions)
			}
			dim := plan.Dimension{Name: d.Name.Name}
			lseen := c.newSeen()
			for _, l := range d.Limits {
				if !lseen.first(l.Kind, l.Range(), "dimension") {
					continue
				}
				v, ok := c.intValue(l.Value)
				if !ok {
					continue
				}
				if v < 0 {
					c.diags.Errorf(l.Value.Range(), dsl.CodeBudgetLimits, "%s limit must not be negative", l.Kind)
					continue
				}
				if l.Kind == "hard" {
					dim.Hard = v
				} else {
					dim.Soft = v
				}
			}
			if dim.Hard > 0 && dim.Soft > dim.Hard {
				c.diags.Errorf(d.Name.Range(), dsl.CodeBudgetLimits, "soft limit %d of dimension %q is above its hard limit %d", dim.Soft, dim.Name, dim.Hard)
			}
			b.Dimensions = append(b.Dimensions, dim)
		case it.Reset != nil:
			if seen.first("reset", it.Range(), "budget") {
				b.ResetMs, _ = c.settingDuration(it.Reset, "reset", true)
			}
		case it.OnHardLimit != nil:
			if seen.first("on_hard_limit", it.Range(), "budget") {
				switch v := it.OnHardLimit.Name; v {
				case plan.OnHardLimitBlock, plan.OnHardLimitFail:
					b.OnHardLimit = v
				default:
					c.badValue(it.OnHardLimit, "on_hard_limit", plan.OnHardLimitBlock, plan.OnHardLimitFail)
				}
			}
		case it.Scope != nil:
			if seen.first("scope", it.Range(), "budget") {
				switch v := it.Scope.Name; v {
				case plan.ScopeShared, plan.ScopeRun:
					b.Scope = v
				default:
					c.badValue(it.Scope, "scope", plan.ScopeShared, plan.ScopeRun)
				}
			}
		}
	}
	if len(b.Dimensions) == 0 {
		c.diags.Errorf(bd.Name.Range(), dsl.CodeBudgetLimits, "budget %q has no dimension: add `dimension NAME { hard N }`", b.Name)
	}
	c.planBudgets[b.Name] = b
}

// badValue reports a keyword value outside its allowed set.
func (c *checker) badValue(id *dsl.Ident, what string, allowed ...string) {
	msg := "invalid " + what + " " + quote(id.Name) + ": must be " + orList(allowed)
	if s := cmp.Or(dsl.Suggest(id.Name, allowed), onlyPrefixed(id.Name, allowed)); s != "" {
		msg += "; did you mean " + quote(s) + "?"
	}
	c.diags.Errorf(id.Range(), dsl.CodeBadValue, "%s", msg)
}

// onlyPrefixed returns the one candidate that starts with name (ignoring
// case), such as "failure" for "fail" or "exponential" for "exp": an
// abbreviation too short for Suggest's edit distance. It returns "" when
// none or several do.
func onlyPrefixed(name string, candidates []string) string {
	found := ""
	for _, c := range candidates {
		if len(name) < len(c) && strings.HasPrefix(strings.ToLower(c), strings.ToLower(name)) {
			if found != "" {
				return ""
			}
			found = c
		}
	}
	return found
}

func quote(s string) string { return "\"" + s + "\"" }

// orList formats "a", "b" or "c".
func orList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// checkQuota compiles a quota declaration.
func (c *checker) checkQuota(qd *dsl.QuotaDecl) {
	q := &plan.Quota{Name: qd.Name.Name}
	seen := c.newSeen()
	for _, it := range qd.Items {
		switch {
		case it.Rate != nil:
			if !seen.first("rate", it.Range(), "quota") {
				continue
			}
			if n, ok := c.intValue(it.Rate.Count); ok {
				if n < 1 {
					c.diags.Errorf(it.Rate.Count.Range(), dsl.CodeQuotaLimits, "rate must be at least 1")
				} else {
					q.Rate = n
				}
			}
			q.WindowMs, _ = c.settingDuration(it.Rate.Window, "rate window", true)
		case it.Concurrency != nil:
			if !seen.first("concurrency", it.Range(), "quota") {
				continue
			}
			if n, ok := c.intValue(it.Concurrency); ok {
				if n < 1 {
					c.diags.Errorf(it.Concurrency.Range(), dsl.CodeQuotaLimits, "concurrency must be at least 1")
				} else {
					q.Concurrency = n
				}
			}
		case it.Jitter != nil:
			if seen.first("jitter", it.Range(), "quota") {
				q.JitterMs, _ = c.settingDuration(it.Jitter, "jitter", false)
			}
		case it.Key != nil:
			if seen.first("key", it.Range(), "quota") {
				parts := make([]string, len(it.Key.Parts))
				for i, p := range it.Key.Parts {
					parts[i] = p.Name
				}
				q.Key = strings.Join(parts, ".")
				c.quotaKeys[q.Name] = it.Key
				if len(q.Key) > plan.MaxQuotaKeyLen {
					c.diags.Errorf(it.Key.Range(), dsl.CodeQuotaKey, "key path %q is %d bytes long; the limit is %d", q.Key, len(q.Key), plan.MaxQuotaKeyLen)
				}
			}
		}
	}
	if _, hasRate := seen.seen["rate"]; !hasRate {
		if _, hasConc := seen.seen["concurrency"]; !hasConc {
			c.diags.Errorf(qd.Name.Range(), dsl.CodeQuotaLimits, "quota %q limits nothing: add `rate N per DURATION` or `concurrency N`", q.Name)
		}
	}
	c.planQuotas[q.Name] = q
}
