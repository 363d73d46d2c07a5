package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// An input under the 1 MiB limit that grows past it once filled in (each
// {{fire_time}} of 13 bytes becomes 20 or 25) is refused by PUT: every
// fire would be.
func TestScheduleFilledInputTooLarge(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = 50 * time.Millisecond
	})
	c := env.Client
	ctx := ctxT(t)
	in := `{"s":"` + strings.Repeat("{{fire_time}}", 60000) + `"}` // 780 KB; 1.2 MB filled in
	_, _, err := c.PutSchedule(ctx, "big", wire.PutSchedule{Template: "two", Cron: "@every 1s", Input: json.RawMessage(in)})
	if ae := apiErr(t, err); ae.Status != http.StatusRequestEntityTooLarge || ae.Details["field"] != "input" ||
		!strings.Contains(ae.Message, "placeholders filled in") {
		t.Fatalf("PUT of an input too large once filled in: %v", err)
	}
}
