package api

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/wire"
)

// LeaseWatcher answers the lease watches of workers (AddLeaseWatch).
type LeaseWatcher interface {
	// WatchLeases waits up to wait for some of leases (validated: one per
	// execution) to end other than by their worker's report, and returns
	// those as a renew would report them (OK false, the error with code
	// wire.CodeCancelled, wire.CodeStaleLease or wire.CodeNotFound); none
	// when wait passed first, when the server is stopping, or when a
	// later watch of the same instance (instance, when not empty) replaced
	// this one.
	WatchLeases(ctx context.Context, instance string, leases []wire.Lease, wait time.Duration) ([]wire.LeaseResult, error)
}

// AddLeaseWatch serves POST /v1/worker/watch with w, behind the same
// token as the other worker routes. Call it before serving. A server
// without it answers the route 404 unknown_route, which the worker SDK
// takes for a server older than the route: it then learns that a lease
// ended at its next renew only.
func (s *Server) AddLeaseWatch(w LeaseWatcher) error {
	if w == nil {
		return errors.New("api: AddLeaseWatch: nil LeaseWatcher")
	}
	s.V1().POST("/worker/watch", func(c echo.Context) error { return s.watch(c, w) })
	return nil
}

func (s *Server) watch(c echo.Context, w LeaseWatcher) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.WatchRequest
	if err := Decode(c, s.limit(BodyLimitBatch), false, &req); err != nil {
		return err
	}
	if e := checkWatch(&req); e != nil {
		return e
	}
	res, err := w.WatchLeases(c.Request().Context(), req.InstanceID, req.Leases, time.Duration(req.WaitMs)*time.Millisecond)
	if err != nil {
		return err
	}
	if res == nil {
		res = []wire.LeaseResult{}
	}
	b, err := wire.AppendLeaseResults(nil, &wire.LeaseResults{Results: res})
	return jsonBlob(c, b, err)
}

// checkWatch validates a watch request: worker_id and instance_id
// (optional) as a claim's, 1..wire.BatchMax leases, each complete and each of another
// execution, and wait_ms within 0..wire.WatchWaitMaxMs.
func checkWatch(req *wire.WatchRequest) *Error {
	if req.WorkerID != "" {
		if e := workerIDError(func() string { return "worker_id" }, req.WorkerID); e != nil {
			return e
		}
	}
	if req.InstanceID != "" {
		if e := workerIDError(func() string { return "instance_id" }, req.InstanceID); e != nil {
			return e
		}
	}
	if e := checkBatchLen("leases", len(req.Leases)); e != nil {
		return e
	}
	seen := make(map[string]int, len(req.Leases))
	for i, l := range req.Leases {
		field := "leases[" + strconv.Itoa(i) + "]"
		if e := checkLease(field, l); e != nil {
			return e
		}
		if j, dup := seen[l.ExecutionID]; dup {
			return invalid(field+".execution_id", "%q is also leases[%d]: one lease per execution", l.ExecutionID, j)
		}
		seen[l.ExecutionID] = i
	}
	if req.WaitMs < 0 || req.WaitMs > wire.WatchWaitMaxMs {
		return invalid("wait_ms", "%d is outside 0..%d", req.WaitMs, wire.WatchWaitMaxMs)
	}
	return nil
}
