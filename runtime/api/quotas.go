package api

import (
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

func (a *admission) putQuota(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.PutQuota
	if err := Decode(c, a.s.limit(BodyLimitDefault), false, &req); err != nil {
		return err
	}
	id, e := resourceID(req.ID, req.Namespace, req.Name)
	if e != nil {
		return e
	}
	if e := checkQuota(req); e != nil {
		return e
	}
	q, created, err := a.svc.PutQuota(c.Request().Context(), id, req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, wire.PutQuotaResponse{Quota: *q, Created: created})
}

// listQuotas serves GET /v1/quotas.
func (a *admission) listQuotas(c echo.Context) error {
	q, e := limitListQuery(c, false)
	if e != nil {
		return e
	}
	out, err := a.svc.ListQuotas(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// Limits of a quota pause.
const (
	// QuotaPauseMax bounds a pause's length.
	QuotaPauseMax = store.QuotaPauseMax
	// PauseReasonMaxBytes bounds a pause's reason.
	PauseReasonMaxBytes = store.MaxPauseReasonBytes
)

// quotaAction serves POST /v1/quotas/{id}/pause and /resume.
func (a *admission) quotaAction(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathID(c)
	if e != nil {
		return e
	}
	if rest, ok := strings.CutSuffix(id, "/pause"); ok {
		var req wire.QuotaPause
		if err := Decode(c, a.s.limit(BodyLimitDefault), false, &req); err != nil {
			return err
		}
		if e := checkPause(req); e != nil {
			return e
		}
		q, err := a.svc.PauseQuota(c.Request().Context(), rest, req)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, q)
	}
	if rest, ok := strings.CutSuffix(id, "/resume"); ok {
		var req wire.QuotaResume
		if err := Decode(c, a.s.limit(BodyLimitDefault), true, &req); err != nil {
			return err
		}
		if e := checkQuotaKey(req.Key); e != nil {
			return e
		}
		q, err := a.svc.ResumeQuota(c.Request().Context(), rest, req)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, q)
	}
	return Errorf(http.StatusNotFound, wire.CodeUnknownRoute, "no such route: POST /v1/quotas/{id} takes /pause or /resume")
}

// PauseEnd parses the until of a quota pause: an RFC 3339 time.
func PauseEnd(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// checkPause validates a pause before anything is written.
func checkPause(req wire.QuotaPause) *Error {
	if e := checkQuotaKey(req.Key); e != nil {
		return e
	}
	switch {
	case req.Until == "" && req.ForMs == 0:
		return invalid("until", "give until (a time) or for_ms (a length of at least 1 ms)")
	case req.Until != "" && req.ForMs != 0:
		return invalid("for_ms", "give until or for_ms, not both")
	case req.ForMs < 0 || req.ForMs > QuotaPauseMax.Milliseconds():
		return invalid("for_ms", "%d is outside 1..%d", req.ForMs, QuotaPauseMax.Milliseconds())
	case req.Until != "":
		until, err := PauseEnd(req.Until)
		if err != nil {
			return invalid("until", "%q is not an RFC 3339 time with its zone (such as 2026-11-22T13:00:00Z)", req.Until)
		}
		if !until.After(time.Now()) {
			return invalid("until", "%s has passed", req.Until)
		}
		if time.Until(until) > QuotaPauseMax {
			return invalid("until", "%s is more than %s away", req.Until, QuotaPauseMax)
		}
	}
	if len(req.Reason) > PauseReasonMaxBytes {
		return invalid("reason", "%d bytes, the limit is %d", len(req.Reason), PauseReasonMaxBytes)
	}
	if strings.ContainsFunc(req.Reason, unicode.IsControl) {
		return invalid("reason", "must not contain control characters (it is shown as a blocking detail)")
	}
	return nil
}

// checkQuotaKey validates the key value of a keyed quota's subject with
// the store's rule (store.QuotaKeyProblem): one an execution's input can
// give (no space, comma or control character), or "" for an unkeyed quota.
func checkQuotaKey(key string) *Error {
	if key == "" {
		return nil
	}
	if p := store.QuotaKeyProblem(key); p != "" {
		return invalid("key", "%s", p)
	}
	return nil
}

// checkQuota validates a quota definition before anything is written.
func checkQuota(req wire.PutQuota) *Error {
	if req.Rate < 0 {
		return invalid("rate", "must not be negative")
	}
	if req.Concurrency < 0 {
		return invalid("concurrency", "must not be negative")
	}
	if req.Rate == 0 && req.Concurrency == 0 {
		return invalid("rate", "a quota needs a rate, a concurrency cap or both")
	}
	if e := checkDuration("window_ms", req.WindowMs); e != nil {
		return e
	}
	if req.WindowMs != 0 && req.Rate == 0 {
		return invalid("window_ms", "is set without a rate")
	}
	if e := checkDuration("jitter_ms", req.JitterMs); e != nil {
		return e
	}
	if req.Key != "" {
		if e := checkIdent("key", req.Key, NameMaxBytes, true); e != nil {
			return e
		}
		for _, part := range strings.Split(req.Key, ".") {
			if part == "" {
				return invalid("key", "%q is not a dotted field path", req.Key)
			}
		}
	}
	return nil
}

func (a *admission) getQuota(c echo.Context) error {
	if e := onlyQuery(c, "key"); e != nil {
		return e
	}
	id, e := pathID(c)
	if e != nil {
		return e
	}
	var only *string
	if key := c.QueryParam("key"); key != "" {
		if e := checkQuotaKey(key); e != nil {
			return e
		}
		only = &key // one subject read, zero counts when it had no activity
	}
	q, err := a.svc.GetQuota(c.Request().Context(), id, only)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q)
}
