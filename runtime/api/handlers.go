package api

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

func (s *Server) create(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.CreateExecution
	if err := Decode(c, s.limit(BodyLimitCreate), false, &req); err != nil {
		return err
	}
	if e := normalizeCreate("", &req); e != nil {
		return e
	}
	res, err := s.cfg.Service.Create(c.Request().Context(), []wire.CreateExecution{req})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return Internal(fmt.Errorf("create returned %d results for 1 request", len(res)))
	}
	r := res[0]
	if r.Error != nil {
		return errorOf(r.Error)
	}
	status := http.StatusOK
	if r.Created {
		status = http.StatusCreated
	}
	return c.JSON(status, wire.CreateExecutionResponse{Execution: *r.Execution, Created: r.Created})
}

func (s *Server) createBatch(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.CreateBatchRequest
	if err := Decode(c, s.limit(BodyLimitBatch), false, &req); err != nil {
		return err
	}
	if e := checkBatchLen("executions", len(req.Executions)); e != nil {
		return e
	}
	for i := range req.Executions {
		if e := normalizeCreate("executions["+strconv.Itoa(i)+"].", &req.Executions[i]); e != nil {
			return e
		}
	}
	res, err := s.cfg.Service.Create(c.Request().Context(), req.Executions)
	if err != nil {
		return err
	}
	out := make([]wire.CreateBatchResult, len(res))
	for i, r := range res {
		out[i] = wire.CreateBatchResult{Created: r.Created, Error: r.Error}
		if r.Execution != nil {
			out[i].ID, out[i].State = r.Execution.ID, r.Execution.State
		}
	}
	return c.JSON(http.StatusOK, wire.CreateBatchResponse{Results: out})
}

func (s *Server) get(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	ex, err := s.cfg.Service.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ex)
}

func (s *Server) list(c echo.Context) error {
	q := ListQuery{
		Namespace: c.QueryParam("namespace"),
		Lane:      c.QueryParam("lane"),
		State:     c.QueryParam("state"),
		Cursor:    c.QueryParam("cursor"),
		Limit:     ListLimitDef,
	}
	if e := onlyQuery(c, "namespace", "lane", "state", "cursor", "limit"); e != nil {
		return e
	}
	n, e := limitParam(c)
	if e != nil {
		return e
	}
	if n > 0 {
		q.Limit = n
	}
	out, err := s.cfg.Service.List(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// NamespaceQuery is the filter of GET /v1/namespaces.
type NamespaceQuery struct {
	Namespace string // "" = every namespace
	Lanes     bool   // the lanes' counts (lanes=false leaves them out)
}

// namespaces serves GET /v1/namespaces.
func (s *Server) namespaces(c echo.Context) error {
	if e := onlyQuery(c, "namespace", "lanes"); e != nil {
		return e
	}
	q := NamespaceQuery{Namespace: c.QueryParam("namespace"), Lanes: true}
	if q.Namespace != "" {
		if e := checkName("namespace", q.Namespace); e != nil {
			return e
		}
	}
	switch v := c.QueryParam("lanes"); v {
	case "", "true":
	case "false":
		q.Lanes = false
	default:
		return invalid("lanes", "%q: want true or false", v)
	}
	out, err := s.cfg.Service.Namespaces(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// limitParam reads the limit query parameter of a list route: 0 when
// absent, else 1..ListLimitMax.
func limitParam(c echo.Context) (int, *Error) {
	vs, ok := c.QueryParams()["limit"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(vs[0])
	if err != nil || n < 1 || n > ListLimitMax {
		return 0, invalid("limit", "%q is not an integer in 1..%d", vs[0], ListLimitMax)
	}
	return n, nil
}

func (s *Server) result(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	res, err := s.cfg.Service.Result(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) cancel(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.Cancel
	if err := Decode(c, s.limit(BodyLimitDefault), true, &req); err != nil {
		return err
	}
	if e := checkReason("reason", req.Reason); e != nil {
		return e
	}
	ex, err := s.cfg.Service.Cancel(c.Request().Context(), id, cmp.Or(req.Reason, "cancelled through the API"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ex)
}

func (s *Server) setPriority(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.SetPriority
	if err := Decode(c, s.limit(BodyLimitDefault), false, &req); err != nil {
		return err
	}
	if req.Priority == nil {
		return invalid("priority", "is required")
	}
	if p := *req.Priority; p < plan.PriorityMin || p > plan.PriorityMax {
		return invalid("priority", "%d is outside %d..%d", p, plan.PriorityMin, plan.PriorityMax)
	}
	ex, err := s.cfg.Service.SetPriority(c.Request().Context(), id, *req.Priority)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ex)
}

func (s *Server) revokeLease(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.RevokeLease
	if err := Decode(c, s.limit(BodyLimitDefault), true, &req); err != nil {
		return err
	}
	if e := checkReason("reason", req.Reason); e != nil {
		return e
	}
	var lease *wire.Lease
	if req.LeaseID != "" || req.Epoch != 0 {
		lease = &wire.Lease{ExecutionID: id, LeaseID: req.LeaseID, Epoch: req.Epoch}
		if e := checkLease("", *lease); e != nil {
			return e
		}
	}
	ex, err := s.cfg.Service.RevokeLease(c.Request().Context(), id, cmp.Or(req.Reason, "revoked through the API"), lease)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ex)
}

func (s *Server) leaseDuration(field string, ms int64) (time.Duration, *Error) {
	if ms == 0 {
		return s.cfg.LeaseDefault, nil
	}
	if ms < wire.LeaseMsMin || ms > wire.LeaseMsMax {
		return 0, invalid(field, "%d is outside %d..%d", ms, wire.LeaseMsMin, wire.LeaseMsMax)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *Server) claim(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.ClaimRequest
	if err := Decode(c, s.limit(BodyLimitClaim), false, &req); err != nil {
		return err
	}
	if e := s.checkClaim(&req); e != nil {
		return e
	}
	tasks, err := s.cfg.Service.Claim(c.Request().Context(), req)
	if err != nil {
		return err
	}
	s.met.granted("claim", len(tasks))
	if tasks == nil {
		tasks = []wire.Task{}
	}
	b, err := wire.AppendClaimResponse(nil, &wire.ClaimResponse{Tasks: tasks})
	return jsonBlob(c, b, err)
}

// workerIdentity validates the identity fields shared by claims and
// heartbeats (worker_id, instance_id, namespace, lanes, capabilities) and
// fills in their defaults: instance_id is worker_id, namespace
// plan.DefaultNamespace, lanes [plan.DefaultLane]. prefix starts the
// field names of its errors ("handoff." for a hand-off's).
func workerIdentity(prefix, workerID string, instanceID, namespace *string, lanes *[]string, caps []string) *Error {
	// Field names are built only for an error: a hand-off's prefix would
	// cost an allocation per name on every report.
	named := func(f string) func() string { return func() string { return prefix + f } }
	if e := workerIDError(named("worker_id"), workerID); e != nil {
		return e
	}
	*instanceID = cmp.Or(*instanceID, workerID)
	if e := workerIDError(named("instance_id"), *instanceID); e != nil {
		return e
	}
	*namespace = cmp.Or(*namespace, plan.DefaultNamespace)
	if e := nameError(named("namespace"), *namespace); e != nil {
		return e
	}
	if len(*lanes) == 0 {
		*lanes = []string{plan.DefaultLane}
	}
	if len(*lanes) > 64 {
		return invalid(prefix+"lanes", "has %d lanes, the limit is 64", len(*lanes))
	}
	for i, l := range *lanes {
		if e := nameError(item(prefix+"lanes", i), l); e != nil {
			return e
		}
	}
	if err := plan.ValidateCapabilities(caps); err != nil {
		return invalid(prefix+"capabilities", "%v", err)
	}
	return nil
}

// workerIDError checks a worker or instance id: an identifier that may
// hold ':' but, as the store requires, no comma. field names it, for an
// error only.
func workerIDError(field func() string, id string) *Error {
	if e := identError(field, id, WorkerIDMaxBytes, false); e != nil {
		return e
	}
	if strings.Contains(id, ",") {
		return invalid(field(), "%q contains a comma", id)
	}
	return nil
}

// checkClaim validates a claim and fills in its defaults.
func (s *Server) checkClaim(req *wire.ClaimRequest) *Error {
	if e := workerIdentity("", req.WorkerID, &req.InstanceID, &req.Namespace, &req.Lanes, req.Capabilities); e != nil {
		return e
	}
	if e := checkKinds("kinds", req.Kinds); e != nil {
		return e
	}
	if req.Max == 0 {
		req.Max = 1
	}
	if req.Max < 1 || req.Max > wire.ClaimMaxLimit {
		return invalid("max", "%d is outside 1..%d", req.Max, wire.ClaimMaxLimit)
	}
	if req.WaitMs < 0 || req.WaitMs > wire.ClaimWaitMaxMs {
		return invalid("wait_ms", "%d is outside 0..%d", req.WaitMs, wire.ClaimWaitMaxMs)
	}
	d, e := s.leaseDuration("lease_ms", req.LeaseMs)
	if e != nil {
		return e
	}
	req.LeaseMs = d.Milliseconds()
	return nil
}

func (s *Server) renew(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.RenewRequest
	if err := Decode(c, s.limit(BodyLimitBatch), false, &req); err != nil {
		return err
	}
	if e := checkBatchLen("leases", len(req.Leases)); e != nil {
		return e
	}
	for i, l := range req.Leases {
		if e := checkLeaseItem("leases", i, l); e != nil {
			return e
		}
	}
	d, e := s.leaseDuration("lease_ms", req.LeaseMs)
	if e != nil {
		return e
	}
	res, err := s.cfg.Service.Renew(c.Request().Context(), req.Leases, d)
	if err != nil {
		return err
	}
	s.met.reported("renew", res)
	b, err := wire.AppendLeaseResults(nil, &wire.LeaseResults{Results: res})
	return jsonBlob(c, b, err)
}

func (s *Server) complete(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	data, err := readBody(c, s.limit(BodyLimitBatch))
	if err != nil {
		return err
	}
	// What the SDK sends takes the fast path; anything else decodes as
	// every body does, for the value or the error.
	req, ok := wire.FastCompleteRequest(data)
	if !ok {
		req = wire.CompleteRequest{}
		if err := decodeBody(data, false, &req); err != nil {
			return err
		}
	}
	if e := checkBatchLen("completions", len(req.Completions)); e != nil {
		return e
	}
	for i, it := range req.Completions {
		if e := checkLeaseItem("completions", i, it.Lease); e != nil {
			return e
		}
	}
	if h := req.Handoff; h != nil {
		if e := s.checkHandoff(req.WorkerID, h, len(req.Completions)); e != nil {
			return e
		}
	}
	res, tasks, err := s.cfg.Service.Complete(c.Request().Context(), req)
	if err != nil {
		return err
	}
	s.met.reported("complete", res)
	s.met.granted("handoff", len(tasks))
	b, err := wire.AppendLeaseResults(nil, &wire.LeaseResults{Results: res, Tasks: tasks})
	return jsonBlob(c, b, err)
}

// checkHandoff validates the hand-off of a complete request of n items
// and fills in its defaults, as checkClaim does for a claim.
func (s *Server) checkHandoff(workerID string, h *wire.Handoff, n int) *Error {
	if workerID == "" {
		return invalid("worker_id", "is required with a handoff")
	}
	if e := workerIdentity("handoff.", workerID, &h.InstanceID, &h.Namespace, &h.Lanes, h.Capabilities); e != nil {
		return e
	}
	if e := checkKinds("handoff.kinds", h.Kinds); e != nil {
		return e
	}
	if h.Max < 1 || h.Max > n {
		return invalid("handoff.max", "%d is outside 1..%d (the number of completions)", h.Max, n)
	}
	d, e := s.leaseDuration("handoff.lease_ms", h.LeaseMs)
	if e != nil {
		return e
	}
	h.LeaseMs = d.Milliseconds()
	return nil
}

func (s *Server) fail(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.FailRequest
	if err := Decode(c, s.limit(BodyLimitBatch), false, &req); err != nil {
		return err
	}
	if e := checkBatchLen("failures", len(req.Failures)); e != nil {
		return e
	}
	for i := range req.Failures {
		f := &req.Failures[i]
		if e := checkLeaseItem("failures", i, f.Lease); e != nil {
			return e
		}
		f.Message = cutMessage(f.Message)
	}
	res, err := s.cfg.Service.Fail(c.Request().Context(), req.Failures)
	if err != nil {
		return err
	}
	s.met.reported("fail", res)
	b, err := wire.AppendLeaseResults(nil, &wire.LeaseResults{Results: res})
	return jsonBlob(c, b, err)
}

// single turns the one result of a batched call into a response: 200 with
// the result, or the item's error with its status (409 for a stale lease).
func single(c echo.Context, res []wire.LeaseResult, err error) error {
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return Internal(fmt.Errorf("batched call returned %d results for 1 item", len(res)))
	}
	r := res[0]
	if r.Error != nil {
		return errorOf(r.Error)
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) renewOne(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.SingleRenew
	if err := Decode(c, s.limit(BodyLimitDefault), false, &req); err != nil {
		return err
	}
	l := wire.Lease{ExecutionID: id, LeaseID: req.LeaseID, Epoch: req.Epoch}
	if e := checkLease("", l); e != nil {
		return e
	}
	d, e := s.leaseDuration("lease_ms", req.LeaseMs)
	if e != nil {
		return e
	}
	res, err := s.cfg.Service.Renew(c.Request().Context(), []wire.Lease{l}, d)
	s.met.reported("renew", res)
	return single(c, res, err)
}

func (s *Server) completeOne(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.SingleComplete
	if err := Decode(c, s.limit(BodyLimitCreate), false, &req); err != nil {
		return err
	}
	l := wire.Lease{ExecutionID: id, LeaseID: req.LeaseID, Epoch: req.Epoch}
	if e := checkLease("", l); e != nil {
		return e
	}
	res, _, err := s.cfg.Service.Complete(c.Request().Context(), wire.CompleteRequest{Completions: []wire.Completion{{Lease: l, Output: req.Output}}})
	s.met.reported("complete", res)
	if len(res) == 1 && res[0].Error != nil && res[0].Error.Details["field"] == "completions[0].output" {
		res[0].Error.Details["field"] = "output" // this route's body
	}
	return single(c, res, err)
}

func (s *Server) failOne(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.SingleFail
	if err := Decode(c, s.limit(BodyLimitDefault), false, &req); err != nil {
		return err
	}
	l := wire.Lease{ExecutionID: id, LeaseID: req.LeaseID, Epoch: req.Epoch}
	if e := checkLease("", l); e != nil {
		return e
	}
	res, err := s.cfg.Service.Fail(c.Request().Context(), []wire.Failure{{Lease: l, Message: cutMessage(req.Message), Retryable: req.Retryable}})
	s.met.reported("fail", res)
	return single(c, res, err)
}

// errorOf turns the error of one item of a batch into the error of a
// single-item route, with the status of its code.
func errorOf(b *wire.ErrorBody) *Error {
	return &Error{Status: statusOf(b.Code), Code: b.Code, Message: b.Message, Details: b.Details}
}

// statusOf maps a stable error code to its HTTP status.
func statusOf(code string) int {
	switch code {
	case wire.CodeInvalidJSON, wire.CodeUnknownField, wire.CodeValidation:
		return http.StatusBadRequest
	case wire.CodeUnauthorized:
		return http.StatusUnauthorized
	case wire.CodeNotFound, wire.CodeUnknownRoute:
		return http.StatusNotFound
	case wire.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case wire.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case wire.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case wire.CodeStaleLease, wire.CodeCancelled, wire.CodeConflict, wire.CodeNotTerminal:
		return http.StatusConflict
	case wire.CodeUnavailable:
		return http.StatusServiceUnavailable
	case wire.CodeNotImplemented:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// jsonBlob answers 200 with b, an answer the wire package encoded as
// encoding/json would (and as c.JSON writes it, with a final newline), or
// the encoding error. The answer says its length: net/http would send one
// over 2 KiB (a claim or a hand-off of a few tasks) chunked, which the
// client reads into a buffer grown as it goes instead of one of the
// announced size.
func jsonBlob(c echo.Context, b []byte, err error) error {
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	b = append(b, '\n')
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	return c.JSONBlob(http.StatusOK, b)
}
