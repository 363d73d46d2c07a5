package api

import (
	"cmp"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

func (a *admission) heartbeat(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.WorkerHeartbeat
	// A claim's limit: the heartbeat names the worker's kinds as a claim does.
	if err := Decode(c, a.s.limit(BodyLimitClaim), false, &req); err != nil {
		return err
	}
	if e := workerIdentity("", req.WorkerID, &req.InstanceID, &req.Namespace, &req.Lanes, req.Capabilities); e != nil {
		return e
	}
	if e := checkKinds("kinds", req.Kinds); e != nil {
		return e
	}
	if req.TTLMs != 0 && (req.TTLMs < wire.LeaseMsMin || req.TTLMs > wire.LeaseMsMax) {
		return invalid("ttl_ms", "%d is outside %d..%d", req.TTLMs, wire.LeaseMsMin, wire.LeaseMsMax)
	}
	res, err := a.svc.Heartbeat(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (a *admission) workers(c echo.Context) error {
	if e := onlyQuery(c, "namespace"); e != nil {
		return e
	}
	ns := cmp.Or(c.QueryParam("namespace"), plan.DefaultNamespace)
	if e := checkName("namespace", ns); e != nil {
		return e
	}
	out, err := a.svc.Workers(c.Request().Context(), ns)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
