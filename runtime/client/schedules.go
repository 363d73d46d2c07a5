package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/flowfabric/ff/runtime/wire"
)

// PutSchedule creates or replaces schedule name: a run of req.Template at
// every fire time of req.Cron. created is false for a replacement.
func (c *Client) PutSchedule(ctx context.Context, name string, req wire.PutSchedule) (s *wire.Schedule, created bool, err error) {
	var out wire.PutScheduleResponse
	if err := c.do(ctx, http.MethodPut, "/v1/schedules/"+url.PathEscape(name), nil, req, &out); err != nil {
		return nil, false, err
	}
	return &out.Schedule, out.Created, nil
}

// GetSchedule returns a schedule with its next fire and what its last fire
// did.
func (c *Client) GetSchedule(ctx context.Context, name string) (*wire.Schedule, error) {
	var out wire.Schedule
	if err := c.do(ctx, http.MethodGet, "/v1/schedules/"+url.PathEscape(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSchedules returns every schedule, by name.
func (c *Client) ListSchedules(ctx context.Context) (*wire.ScheduleList, error) {
	var out wire.ScheduleList
	if err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunSchedule starts a run of schedule name's template now, as a fire at
// this moment would: in the schedule's namespace, with its input (the
// placeholders filled in for now, in its zone). The schedule's own fires
// are not changed. WithIdempotencyKey makes a repeat return the first
// run, and WithWait waits for its end as with StageTemplate; WithNamespace
// does not apply (an error).
func (c *Client) RunSchedule(ctx context.Context, name string, opts ...StageOption) (*Run, error) {
	o := stageOptions(opts)
	if o.Namespace != "" {
		return nil, fmt.Errorf("client: run schedule %q: WithNamespace does not apply: its runs go to the schedule's namespace", name)
	}
	var out wire.FlowRun
	req := wire.RunSchedule{IdempotencyKey: o.IdempotencyKey}
	if err := c.do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+"/runs", o.query(c), req, &out); err != nil {
		return nil, &opError{op: "run schedule " + name, err: err}
	}
	return c.newRun(&out, out.Flow), nil
}

// DeleteSchedule deletes a schedule; runs it started are not touched.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/schedules/"+url.PathEscape(name), nil, nil, nil)
}
