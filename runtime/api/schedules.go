package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/cron"
	"github.com/flowfabric/ff/runtime/wire"
)

// ScheduleService keeps the schedules that start runs of templates. The API
// validates a schedule (its template, expression, time zone and input)
// before calling it.
type ScheduleService interface {
	// PutSchedule creates or replaces schedule name; created is false for
	// a replacement.
	PutSchedule(ctx context.Context, name string, req wire.PutSchedule) (s *wire.Schedule, created bool, err error)
	GetSchedule(ctx context.Context, name string) (*wire.Schedule, error)
	ListSchedules(ctx context.Context) (*wire.ScheduleList, error)
	DeleteSchedule(ctx context.Context, name string) error
	// RunSchedule starts a run of schedule name's template now, as a fire
	// at this moment would (in its namespace, with its input's
	// placeholders filled in for now in its zone), and leaves the
	// schedule as it is (next fire, fires, last run). key, when set, makes
	// a repeat answer the run the first call started (created false); wait
	// is the route's wait_ms, as for the other staging routes.
	RunSchedule(ctx context.Context, name, key string, wait time.Duration) (run *wire.FlowRun, created bool, err error)
}

// schedules serves /v1/schedules.
type schedules struct {
	s   *Server
	f   *flows
	svc ScheduleService
}

// AddSchedules serves the schedule routes over svc, behind the same auth as
// every /v1 route. Call it once, after AddFlows (a schedule names a
// template), before serving.
func (s *Server) AddSchedules(svc ScheduleService) error {
	if svc == nil {
		return errors.New("api: AddSchedules: nil ScheduleService")
	}
	if s.flows == nil {
		return errors.New("api: AddSchedules before AddFlows: schedules need the templates")
	}
	sc := &schedules{s: s, f: s.flows, svc: svc}
	s.v1.PUT("/schedules/:name", sc.put)
	s.v1.GET("/schedules", sc.list)
	s.v1.GET("/schedules/:name", sc.get)
	s.v1.DELETE("/schedules/:name", sc.del)
	s.v1.POST("/schedules/:name/runs", sc.run)
	return nil
}

// check validates a schedule against the templates: the template exists,
// the expression parses in the time zone, and the input fits the
// template's input type (an absent input is null), checked with the
// template's prepared checker as its runs' are (checkRunInput). It
// returns the parsed expression.
func (sc *schedules) check(name string, req *wire.PutSchedule) (*cron.Schedule, *Error) {
	if e := checkName("name", name); e != nil {
		return nil, e
	}
	if strings.Contains(name, "/") {
		return nil, invalid("name", "%q must not contain '/'", name)
	}
	if name == "." || name == ".." {
		return nil, invalid("name", "%q is a path segment a browser or proxy removes: choose another name", name)
	}
	if req.Template == "" {
		return nil, invalid("template", "is required (GET /v1/templates lists them)")
	}
	fl, ok := sc.f.templates[req.Template]
	if !ok {
		return nil, invalid("template", "no template %q%s (GET /v1/templates lists them)", req.Template, sc.f.didYouMean(req.Template))
	}
	req.Cron = strings.TrimSpace(req.Cron)
	if req.Cron == "" {
		return nil, invalid("cron", "is required (such as \"0 2 * * *\", \"@hourly\" or \"@every 15m\")")
	}
	if len(req.Cron) > 256 {
		return nil, invalid("cron", "is %d bytes, the limit is 256", len(req.Cron))
	}
	if len(req.Timezone) > 256 {
		return nil, invalid("timezone", "is %d bytes, the limit is 256", len(req.Timezone))
	}
	loc, err := ScheduleZone(req.Timezone)
	if err != nil {
		return nil, invalid("timezone", "%v", err)
	}
	c, err := cron.Parse(req.Cron, loc)
	if err != nil {
		return nil, invalid("cron", "%s", strings.TrimPrefix(err.Error(), "cron: "))
	}
	if req.Namespace != "" {
		if e := checkName("namespace", req.Namespace); e != nil {
			return nil, e
		}
	}
	if len(req.Input) == 0 {
		req.Input = []byte("null")
	}
	// Checked as a fire would stage it: with its placeholders filled in,
	// and within the size limit also where {{fire_time}} is longest (an
	// offset written +01:00, not Z: a zone at UTC+0 in winter has both).
	sample := c.Next(time.Now())
	if sample.IsZero() {
		sample = time.Now()
	}
	in, err := ScheduleInput(req.Input, sample.In(loc))
	if err != nil {
		return nil, invalid("input", "%v", err)
	}
	longest, err := ScheduleInput(req.Input, sample.In(time.FixedZone("", 3600)))
	if err != nil {
		return nil, invalid("input", "%v", err)
	}
	if n := max(len(in), len(longest)); n > PayloadMaxBytes {
		e := Errorf(http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
			"input: %d bytes with its placeholders filled in, at most %d allowed", n, PayloadMaxBytes)
		e.Details = map[string]any{"field": "input", "limit_bytes": PayloadMaxBytes}
		return nil, e
	}
	if e := checkRunInput(fl, sc.f.checks[req.Template], in); e != nil {
		return nil, e
	}
	return c, nil
}

// ScheduleZone loads the IANA time zone of a schedule ("" = UTC), for the
// API's checks and the runner's fires alike; see cron.Zone, which it is.
// "Local" is refused: it is each host's own zone, so ffrun processes on
// hosts set differently would fire the same schedule at different times.
func ScheduleZone(tz string) (*time.Location, error) { return cron.Zone(tz) }

// The placeholders a schedule's input may hold in its string values,
// filled in at each fire with the fire's time in the schedule's zone
// (cron.PlaceholderFireTime and cron.PlaceholderFireDate).
// {{fire_date-N}} and {{fire_date+N}} are the date N days before or after
// the fire's ({{fire_date-1}}: the day a nightly job at 02:00 works on).
const (
	PlaceholderFireTime = cron.PlaceholderFireTime // RFC 3339, such as 2026-11-23T02:00:00+01:00
	PlaceholderFireDate = cron.PlaceholderFireDate // such as 2026-11-23
)

// ScheduleInput returns a schedule's input for the fire at fire (in the
// schedule's zone), its placeholders filled in: see cron.FillInput, which
// it is. The compiler fills a declared schedule's input with the same
// function, so both check the same value.
func ScheduleInput(input []byte, fire time.Time) ([]byte, error) { return cron.FillInput(input, fire) }

func (sc *schedules) put(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	var req wire.PutSchedule
	if err := Decode(c, sc.s.limit(BodyLimitCreate), false, &req); err != nil {
		return err
	}
	name, e := scheduleName(c)
	if e != nil {
		return e
	}
	if _, e := sc.check(name, &req); e != nil {
		return e
	}
	s, created, err := sc.svc.PutSchedule(c.Request().Context(), name, req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	sc.effective(s)
	return c.JSON(status, wire.PutScheduleResponse{Schedule: *s, Created: created})
}

// scheduleName is the route's schedule name, unescaped (pathParam: "a%2Fb"
// is "a/b", which the checks refuse as a name).
func scheduleName(c echo.Context) (string, *Error) { return pathParam(c, "name", "name") }

// effective fills in what a schedule leaves to its template: the namespace
// its runs go to.
func (sc *schedules) effective(s *wire.Schedule) {
	if s.Namespace != "" {
		return
	}
	if fl, ok := sc.f.templates[s.Template]; ok {
		s.Namespace = cmp.Or(fl.Namespace, plan.DefaultNamespace)
	}
}

func (sc *schedules) get(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	name, e := scheduleName(c)
	if e != nil {
		return e
	}
	s, err := sc.svc.GetSchedule(c.Request().Context(), name)
	if err != nil {
		return err
	}
	sc.effective(s)
	return c.JSON(http.StatusOK, s)
}

func (sc *schedules) list(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	l, err := sc.svc.ListSchedules(c.Request().Context())
	if err != nil {
		return err
	}
	for i := range l.Schedules {
		sc.effective(&l.Schedules[i])
	}
	return c.JSON(http.StatusOK, l)
}

func (sc *schedules) del(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	name, e := scheduleName(c)
	if e != nil {
		return e
	}
	if err := sc.svc.DeleteSchedule(c.Request().Context(), name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// run serves POST /v1/schedules/{name}/runs: a run of the schedule now,
// besides its fires (the body, optional, holds an idempotency key).
func (sc *schedules) run(c echo.Context) error {
	if e := onlyQuery(c, "wait_ms"); e != nil {
		return e
	}
	wait, e := waitParam(c)
	if e != nil {
		return e
	}
	var req wire.RunSchedule
	if err := Decode(c, sc.s.limit(BodyLimitDefault), true, &req); err != nil {
		return err
	}
	name, e := scheduleName(c)
	if e != nil {
		return e
	}
	if e := checkIdemKey("idempotency_key", req.IdempotencyKey); e != nil {
		return e
	}
	run, created, err := sc.svc.RunSchedule(c.Request().Context(), name, req.IdempotencyKey, wait)
	if err != nil {
		return err
	}
	return staged(c, run, created)
}
