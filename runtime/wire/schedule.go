package wire

import (
	"encoding/json"
	"time"
)

// PutSchedule is the body of PUT /v1/schedules/{name}: start a run of
// template Template with Input at every fire time of Cron, read in time
// zone Timezone.
type PutSchedule struct {
	Template string `json:"template"`
	// Cron is a five-field cron expression (minute hour day-of-month month
	// day-of-week), a macro (@hourly, @daily, @weekly, @monthly, @yearly)
	// or "@every <duration>" (whole seconds, aligned to the Unix epoch).
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"` // IANA name; default UTC
	// Input is checked against the template's input type; in its string
	// values {{fire_time}} and {{fire_date}} are filled in at each fire.
	Input     json.RawMessage `json:"input,omitempty"`
	Namespace string          `json:"namespace,omitempty"` // default: the template's
	// Declared marks a schedule put from a .ff file's declaration (ffrun
	// --flows sets it); a put without it makes the schedule the API's.
	Declared bool `json:"declared,omitempty"`
}

// Schedule is a schedule with its next fire and what its last fire did.
type Schedule struct {
	Name      string          `json:"name"`
	Template  string          `json:"template"`
	Cron      string          `json:"cron"`
	Timezone  string          `json:"timezone"`
	Input     json.RawMessage `json:"input,omitempty"`
	Namespace string          `json:"namespace,omitempty"`
	Declared  bool            `json:"declared,omitempty"` // put from a .ff file's declaration
	// NextAt is the next fire (absent: none within five years).
	NextAt *time.Time `json:"next_at,omitempty"`
	// Fires counts the fires recorded; LastFireAt is the last one's
	// scheduled time, LastRunID the run it started, LastError why it
	// started none.
	Fires      int64      `json:"fires"`
	LastFireAt *time.Time `json:"last_fire_at,omitempty"`
	LastRunID  string     `json:"last_run_id,omitempty"`
	// LastRunState is the state of that run now (running, succeeded,
	// failed, cancelled; absent once retention deleted it).
	LastRunState string     `json:"last_run_state,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	CreatedAt    *time.Time `json:"created_at,omitempty"`
	UpdatedAt    *time.Time `json:"updated_at,omitempty"`
}

// PutScheduleResponse answers PUT /v1/schedules/{name}.
type PutScheduleResponse struct {
	Schedule Schedule `json:"schedule"`
	Created  bool     `json:"created"`
}

// RunSchedule is the body of POST /v1/schedules/{name}/runs, which starts
// a run of the schedule's template now, with the schedule's input and
// namespace; the body may be absent.
type RunSchedule struct {
	// IdempotencyKey makes a repeat of the request answer the run the
	// first one started.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ScheduleList answers GET /v1/schedules: every schedule, by name.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}
