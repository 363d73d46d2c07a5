package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

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
	q, err := a.svc.GetQuota(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if key := c.QueryParam("key"); key != "" {
		var subs []wire.QuotaSubject
		for _, s := range q.Subjects {
			if s.Key == key {
				subs = append(subs, s)
			}
		}
		if subs == nil {
			subs = []wire.QuotaSubject{{Key: key}} // no recent activity
		}
		q.Subjects = subs
	}
	return c.JSON(http.StatusOK, q)
}
