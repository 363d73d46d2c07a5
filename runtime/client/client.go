// Package client is the Go client of the ffrun HTTP API: what generated
// Stage<Flow> functions, tools and tests use to start and inspect work.
//
// Every method maps to one route of spec/api.md. A non-2xx answer is
// returned as an *APIError carrying the stable error code.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/bodyread"
	"github.com/flowfabric/ff/runtime/wire"
)

// Stager starts runs of compiled flows. *Client implements it; generated
// Stage<Flow> functions accept the interface so callers can substitute it.
// They call StageFlowJSON with the plan as the generated code embeds it.
type Stager interface {
	StageFlow(ctx context.Context, flow *plan.Flow, input any, opts ...StageOption) (*Run, error)
	StageFlowJSON(ctx context.Context, planJSON []byte, input any, opts ...StageOption) (*Run, error)
}

// StageOption customises one StageFlow call.
type StageOption func(*StageOptions)

// StageOptions are the settings StageOption functions change.
type StageOptions struct {
	IdempotencyKey string // a repeat with the same key returns the first run
	Namespace      string // overrides the flow's namespace when set
	// Wait lets the staging request itself wait up to this long (at most
	// a minute) for the run to end; see WithWait.
	Wait time.Duration
}

// WithIdempotencyKey makes staging idempotent: staging again with the same
// key returns the run created first instead of a new one.
func WithIdempotencyKey(key string) StageOption {
	return func(o *StageOptions) { o.IdempotencyKey = key }
}

// WithNamespace stages the run in namespace ns instead of the flow's own.
func WithNamespace(ns string) StageOption {
	return func(o *StageOptions) { o.Namespace = ns }
}

// WithWait makes the staging request wait on the server up to d (at most
// a minute) for the run to end. A run that ended by then comes back with
// its outcome, and the returned Run's Wait and Result answer from it
// without another request: staging and waiting for a short run cost one
// round trip instead of two. A run still running after d is returned as
// without the option.
func WithWait(d time.Duration) StageOption {
	return func(o *StageOptions) { o.Wait = d }
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as a bearer token on every request.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient makes the Client use hc instead of a default http.Client.
// hc's Timeout, and its transport's ResponseHeaderTimeout when the
// transport is an *http.Transport, bound the long-polls' waits (see
// Claim): the smaller of the two, less a margin.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithTLSConfig makes the default http.Client verify an https server with
// cfg (for example RootCAs holding a private CA, or a client certificate).
// The Client uses a copy: cfg may be shared. It has no effect together
// with WithHTTPClient, whose transport has its own TLS settings.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) { c.tls = cfg }
}

// Client talks to one ffrun server. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	tls   *tls.Config
}

// Bounds of the default transport: a server that does not answer a dial or
// a TLS handshake fails the request instead of holding it until its
// context ends (a worker's long-poll context may not end for minutes).
const (
	dialTimeout      = 10 * time.Second
	handshakeTimeout = 10 * time.Second
)

// The health check of an HTTP/2 connection, on which all of a worker's
// requests travel: a ping after HTTP2PingAfter without a frame received,
// and the connection closed when no answer came within HTTP2PingTimeout.
// Without it a connection that went silent (a NAT or load balancer that
// dropped the flow) would take every request, renewals included, until
// TCP gives up minutes later, and the worker's leases would run out; over
// HTTP/1.1 a request that timed out closed its connection. Together well
// under the default lease (30 s), so that a renewal after a failed one
// finds a new connection.
const (
	HTTP2PingAfter   = 10 * time.Second
	HTTP2PingTimeout = 5 * time.Second
)

// defaultHTTPClient is the http.Client of a Client made without
// WithHTTPClient: pooled connections for a worker's concurrent requests,
// bounded dials and handshakes, TCP keep-alives, and HTTP/2 with an https
// server that offers it (a custom transport speaks HTTP/1.1 only unless
// told otherwise), health-checked by pings (HTTP2PingAfter). tlsConfig is
// cloned: the transport writes its NextProtos.
func defaultHTTPClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig.Clone(),
		HTTP2:                 &http.HTTP2Config{SendPingTimeout: HTTP2PingAfter, PingTimeout: HTTP2PingTimeout},
		TLSHandshakeTimeout:   handshakeTimeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// longPollMargin is what a long-poll leaves of the client's bound (its
// http.Client's Timeout, its transport's ResponseHeaderTimeout), at most
// half of it, for sending the request and reading the answer.
const longPollMargin = 5 * time.Second

// longPollMax is the longest a request may ask the server to wait (a
// claim's or a lease watch's wait_ms, a run result's) and still be
// answered within the http.Client's Timeout and, when its transport is an
// *http.Transport, the transport's ResponseHeaderTimeout (a long-poll's
// headers come when its wait ends), the smaller of the two, so that the
// client does not cut a healthy long-poll short; 0 when neither is set.
// A transport of another type (a wrapper) is not looked into.
func (c *Client) longPollMax() time.Duration {
	t := c.hc.Timeout
	rt := c.hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if tr, ok := rt.(*http.Transport); ok && tr.ResponseHeaderTimeout > 0 && (t == 0 || tr.ResponseHeaderTimeout < t) {
		t = tr.ResponseHeaderTimeout
	}
	return max(t-min(t/2, longPollMargin), 0)
}

// boundWait returns d, a wait asked of the server, bounded by longPollMax.
func (c *Client) boundWait(d time.Duration) time.Duration {
	if m := c.longPollMax(); m > 0 {
		return min(d, m)
	}
	return d
}

// boundWaitMs is boundWait for a wait in milliseconds.
func (c *Client) boundWaitMs(ms int64) int64 {
	if m := c.longPollMax(); m > 0 {
		return min(ms, m.Milliseconds())
	}
	return ms
}

// CloseIdleConnections closes the connections the client keeps open but
// is not using. A server shutting down waits for connections that never
// carried a request (a pool may hold one it dialled but did not need) for
// seconds; programs that stop talking to the server call this.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// New returns a Client for the server at baseURL (for example
// "http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		return nil, errors.New(`client: the base URL is empty (for example "http://127.0.0.1:8080")`)
	}
	if !strings.Contains(baseURL, "://") {
		// "127.0.0.1:8080" fails url.Parse with a message about a colon.
		return nil, fmt.Errorf("client: base URL %q has no scheme: write http://%s", baseURL, baseURL)
	}
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("client: base URL %q: scheme must be http or https", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q has no host", baseURL)
	}
	c := &Client{base: u}
	for _, o := range opts {
		o(c)
	}
	if c.token != "" {
		if err := wire.CheckToken(c.token); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient(c.tls)
	}
	return c, nil
}

// escapeID escapes each segment of a budget or quota id ("<namespace>/<name>",
// whose '/' the route takes as part of the id).
func escapeID(id string) string {
	segs := strings.Split(id, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// APIError is a non-2xx answer of the server.
type APIError struct {
	Status  int            // HTTP status
	Code    string         // stable error code (wire.Code…)
	Message string         // human-readable message
	Details map[string]any // optional structured details
	// RetryAfter is when the server said to try again (429 rate_limited,
	// 503 while ffrun starts): details.retry_after_ms when the answer has
	// it, else its Retry-After header; 0 when it said nothing.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ffrun: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsCode reports whether err is an *APIError with the given code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// ErrFlowsUnsupported is returned (wrapped) by the flow methods (StageFlow,
// StageTemplate, GetRun, Run.Result, ...) when the server has no flow routes.
var ErrFlowsUnsupported = errors.New("flows are not supported by this server yet")

// do sends one request and decodes a 2xx JSON answer into out (when non-nil).
// path is escaped already (its parameters through url.PathEscape or
// escapeID): it is sent as it is, not escaped a second time.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := *c.base
	raw := c.base.EscapedPath() + path
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path, u.RawPath = p, raw
	} else {
		u.Path = c.base.Path + path
	}
	if query != nil {
		u.RawQuery = query.Encode()
	}
	var body io.Reader
	if b, ok := in.(encodedBody); ok {
		body = bytes.NewReader(b)
	} else if in != nil {
		// Without HTML escaping: an input of HTML is sent, and measured
		// against its limit, as it is (wire.Marshal).
		b, err := wire.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := bodyread.All(resp.Body, resp.ContentLength)
	if err != nil {
		return fmt.Errorf("client: %s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp.StatusCode, resp.Header, data)
	}
	if out != nil && len(data) > 0 {
		if err := decodeAnswer(data, out); err != nil {
			return fmt.Errorf("client: %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// decodeAnswer decodes an answer into out (a zero value) as json.Unmarshal
// does; the answers every task and every run pass through take the wire
// package's faster path.
func decodeAnswer(data []byte, out any) error {
	switch v := out.(type) {
	case *wire.ClaimResponse:
		return wire.UnmarshalClaimResponse(data, v)
	case *wire.LeaseResults:
		return wire.UnmarshalLeaseResults(data, v)
	case *wire.FlowRun:
		return wire.UnmarshalFlowRun(data, v)
	}
	return json.Unmarshal(data, out)
}

func decodeError(status int, h http.Header, data []byte) error {
	var env wire.ErrorEnvelope
	if err := json.Unmarshal(data, &env); err != nil || env.Error.Code == "" {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &APIError{Status: status, Code: "http_" + fmt.Sprint(status), Message: msg, RetryAfter: retryAfter(h, nil)}
	}
	return &APIError{Status: status, Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details,
		RetryAfter: retryAfter(h, env.Error.Details)}
}

// retryAfterMax bounds APIError.RetryAfter: a proxy's header asking for
// days is not waited for.
const retryAfterMax = time.Hour

// retryAfter returns when an error answer said to try again: its details'
// retry_after_ms (milliseconds, what ffrun sends with a 429), else its
// Retry-After header (seconds, or an HTTP date); 0 when neither says.
func retryAfter(h http.Header, details map[string]any) time.Duration {
	ms := -1.0
	switch v := details["retry_after_ms"].(type) {
	case float64:
		ms = v
	case json.Number:
		if f, err := v.Float64(); err == nil {
			ms = f
		}
	}
	if ms < 0 {
		v := strings.TrimSpace(h.Get("Retry-After"))
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
			ms = float64(secs) * 1000
		} else if at, err := http.ParseTime(v); err == nil {
			ms = float64(time.Until(at).Milliseconds())
		}
	}
	// Bounded before the conversion, which a huge value would overflow.
	return time.Duration(min(max(ms, 0), float64(retryAfterMax.Milliseconds())) * float64(time.Millisecond))
}

// Health calls /healthz: nil when the process is up.
func (c *Client) Health(ctx context.Context) error {
	err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
	return err
}

// Ready calls /readyz: nil when the server can reach Valkey and its library
// is loaded.
func (c *Client) Ready(ctx context.Context) error {
	err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
	return err
}

// CreateExecution creates one execution. created is false when the
// idempotency key matched an earlier execution, which is returned.
func (c *Client) CreateExecution(ctx context.Context, req wire.CreateExecution) (exec *wire.Execution, created bool, err error) {
	var out wire.CreateExecutionResponse
	if err := c.do(ctx, http.MethodPost, "/v1/executions", nil, req, &out); err != nil {
		return nil, false, err
	}
	return &out.Execution, out.Created, nil
}

// CreateExecutions creates many executions in one request. The whole batch
// is validated first (a bad item fails the call with nothing written); the
// results are in request order.
func (c *Client) CreateExecutions(ctx context.Context, reqs []wire.CreateExecution) ([]wire.CreateBatchResult, error) {
	var out wire.CreateBatchResponse
	if err := c.do(ctx, http.MethodPost, "/v1/executions/batch", nil, wire.CreateBatchRequest{Executions: reqs}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetExecution returns one execution.
func (c *Client) GetExecution(ctx context.Context, id string) (*wire.Execution, error) {
	var out wire.Execution
	if err := c.do(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOptions filter ListExecutions. Empty fields do not filter.
type ListOptions struct {
	Namespace string
	Lane      string
	State     string // public state
	Cursor    string // NextCursor of the previous page
	Limit     int    // page size, at most 500 (more is refused: 400); 0 = the server's default (50)
}

// NamespaceOptions narrow Namespaces; the zero value asks for every
// namespace with its lanes.
type NamespaceOptions struct {
	Namespace    string // only this namespace
	WithoutLanes bool   // leave the lanes' counts out (the bulk of the cost)
}

// Namespaces sums up every namespace that has lanes or workers: the
// flow runs kept, the connected workers and each lane's counts.
func (c *Client) Namespaces(ctx context.Context, o NamespaceOptions) (*wire.NamespaceList, error) {
	q := url.Values{}
	if o.Namespace != "" {
		q.Set("namespace", o.Namespace)
	}
	if o.WithoutLanes {
		q.Set("lanes", "false")
	}
	var out wire.NamespaceList
	if err := c.do(ctx, http.MethodGet, "/v1/namespaces", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListExecutions returns one page of executions.
func (c *Client) ListExecutions(ctx context.Context, o ListOptions) (*wire.ExecutionList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("namespace", o.Namespace)
	set("lane", o.Lane)
	set("state", o.State)
	set("cursor", o.Cursor)
	if o.Limit > 0 {
		q.Set("limit", fmt.Sprint(o.Limit))
	}
	var out wire.ExecutionList
	if err := c.do(ctx, http.MethodGet, "/v1/executions", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelExecution cancels an execution; a running one loses its lease.
func (c *Client) CancelExecution(ctx context.Context, id, reason string) (*wire.Execution, error) {
	var out wire.Execution
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(id)+"/cancel", nil, wire.Cancel{Reason: reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetPriority changes the priority of a waiting execution.
func (c *Client) SetPriority(ctx context.Context, id string, priority int) (*wire.Execution, error) {
	var out wire.Execution
	if err := c.do(ctx, http.MethodPut, "/v1/executions/"+url.PathEscape(id)+"/priority", nil, wire.SetPriority{Priority: &priority}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeLease takes the lease away from the worker running id; the attempt
// is interrupted and the execution becomes eligible again.
func (c *Client) RevokeLease(ctx context.Context, id, reason string) (*wire.Execution, error) {
	return c.revokeLease(ctx, id, wire.RevokeLease{Reason: reason})
}

// GiveBack revokes lease l, only if it is still the execution's lease: a
// worker handing back an attempt it will not finish (the attempt is not
// charged and the execution is eligible again at once). Another lease
// fails with code wire.CodeStaleLease and changes nothing; a lease past its
// expiry, the attempt's timeout or the execution's deadline fails with it
// too, and the server applies that limit instead.
func (c *Client) GiveBack(ctx context.Context, l wire.Lease, reason string) (*wire.Execution, error) {
	return c.revokeLease(ctx, l.ExecutionID, wire.RevokeLease{Reason: reason, LeaseID: l.LeaseID, Epoch: l.Epoch})
}

func (c *Client) revokeLease(ctx context.Context, id string, body wire.RevokeLease) (*wire.Execution, error) {
	var out wire.Execution
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(id)+"/revoke-lease", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecutionResult returns the outcome of a terminal execution. Before the
// execution ends it fails with code wire.CodeNotTerminal.
func (c *Client) ExecutionResult(ctx context.Context, id string) (*wire.ExecutionResult, error) {
	var out wire.ExecutionResult
	if err := c.do(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id)+"/result", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitResult polls ExecutionResult every interval until the execution is
// terminal or ctx ends.
func (c *Client) WaitResult(ctx context.Context, id string, interval time.Duration) (*wire.ExecutionResult, error) {
	interval = max(interval, time.Millisecond)
	for {
		res, err := c.ExecutionResult(ctx, id)
		if err == nil {
			return res, nil
		}
		if !IsCode(err, wire.CodeNotTerminal) {
			return nil, err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("client: wait for %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// Claim long-polls for up to req.Max tasks. With an http.Client whose
// Timeout is set (WithHTTPClient), or whose transport is an
// *http.Transport with a ResponseHeaderTimeout, req.WaitMs is bounded so
// that the answer comes within the smaller of the two: that bound less
// 5 s, or half of it when shorter than 10 s.
func (c *Client) Claim(ctx context.Context, req wire.ClaimRequest) ([]wire.Task, error) {
	req.WaitMs = c.boundWaitMs(req.WaitMs)
	var out wire.ClaimResponse
	if err := c.do(ctx, http.MethodPost, "/v1/worker/claim", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Tasks, nil
}

// Renew extends many leases in one request; one result per lease.
func (c *Client) Renew(ctx context.Context, req wire.RenewRequest) ([]wire.LeaseResult, error) {
	var out wire.LeaseResults
	if err := c.do(ctx, http.MethodPost, "/v1/worker/renew", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// WatchLeases long-polls until some of req.Leases ended other than by the
// worker's own report (a cancel, a revoke, the attempt's timeout, the
// lease's expiry, the execution's deadline), and returns those, each with
// the error a renew would give (code wire.CodeCancelled for a cancel,
// wire.CodeStaleLease or wire.CodeNotFound otherwise); none when
// req.WaitMs passed first (bounded by the http.Client's Timeout as
// Claim's is). A server older than the route answers 404 (unknown_route)
// or 405.
func (c *Client) WatchLeases(ctx context.Context, req wire.WatchRequest) ([]wire.LeaseResult, error) {
	req.WaitMs = c.boundWaitMs(req.WaitMs)
	var out wire.LeaseResults
	if err := c.do(ctx, http.MethodPost, "/v1/worker/watch", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Complete reports many successful attempts in one request.
func (c *Client) Complete(ctx context.Context, req wire.CompleteRequest) ([]wire.LeaseResult, error) {
	res, _, err := c.CompleteHandoff(ctx, req)
	return res, err
}

// CompleteHandoff reports many successful attempts in one request, like
// Complete, and returns the tasks granted by req.Handoff: leases the
// worker now holds.
func (c *Client) CompleteHandoff(ctx context.Context, req wire.CompleteRequest) ([]wire.LeaseResult, []wire.Task, error) {
	body, err := wire.AppendCompleteRequest(nil, &req)
	if err != nil {
		return nil, nil, fmt.Errorf("client: encode complete request: %w", err)
	}
	var out wire.LeaseResults
	if err := c.do(ctx, http.MethodPost, "/v1/worker/complete", nil, encodedBody(body), &out); err != nil {
		return nil, nil, err
	}
	return out.Results, out.Tasks, nil
}

// Fail reports many failed attempts in one request.
func (c *Client) Fail(ctx context.Context, req wire.FailRequest) ([]wire.LeaseResult, error) {
	var out wire.LeaseResults
	if err := c.do(ctx, http.MethodPost, "/v1/worker/fail", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// CompleteOne completes one execution; a stale lease is an *APIError with
// status 409.
func (c *Client) CompleteOne(ctx context.Context, l wire.Lease, output json.RawMessage) (*wire.LeaseResult, error) {
	var out wire.LeaseResult
	body := wire.SingleComplete{LeaseID: l.LeaseID, Epoch: l.Epoch, Output: output}
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(l.ExecutionID)+"/complete", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailOne fails one attempt; a stale lease is an *APIError with status 409.
func (c *Client) FailOne(ctx context.Context, l wire.Lease, message string, retryable bool) (*wire.LeaseResult, error) {
	var out wire.LeaseResult
	body := wire.SingleFail{LeaseID: l.LeaseID, Epoch: l.Epoch, Message: message, Retryable: retryable}
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(l.ExecutionID)+"/fail", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RenewOne renews one lease; a stale lease is an *APIError with status 409.
func (c *Client) RenewOne(ctx context.Context, l wire.Lease, lease time.Duration) (*wire.LeaseResult, error) {
	var out wire.LeaseResult
	body := wire.SingleRenew{LeaseID: l.LeaseID, Epoch: l.Epoch, LeaseMs: lease.Milliseconds()}
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(l.ExecutionID)+"/renew", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
