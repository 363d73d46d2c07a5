package server_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestDeclaredScheduleLoggedOnce: the registration of a declared schedule
// logged "schedule put" (the in-process PUT it makes) and then "schedule
// registered" for the same schedule. It is now one line, "schedule
// registered"; a put through the API is still logged as "schedule put".
func TestDeclaredScheduleLoggedOnce(t *testing.T) {
	t.Parallel()
	var logs servertest.LogBuffer
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "declared-token-0123"
		c.Templates = []*plan.Flow{twoStep()}
		c.Schedules = []plan.Schedule{{Name: "tick", Flow: "two", Cron: "0 3 * * *", Input: json.RawMessage(`{"s":"x"}`)}}
		c.DisableScanners = true
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if got := strings.Count(logs.String(), "schedule=tick"); got != 1 || !strings.Contains(logs.String(), `msg="schedule registered" schedule=tick`) {
		t.Errorf("%d lines name schedule tick, want one, schedule registered:\n%s", got, logs.String())
	}
	if _, _, err := env.Client.PutSchedule(ctxT(t), "manual", wire.PutSchedule{Template: "two", Cron: "0 4 * * *", Input: json.RawMessage(`{"s":"y"}`)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="schedule put" schedule=manual`) {
		t.Errorf("a put through the API is not logged:\n%s", logs.String())
	}
}
