package ffrun_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestFlowsRegistersBudgetsAndQuotas: ffrun --flows registers the shared
// budgets and the quotas the flows declare, in their flows' namespaces,
// and the schedules they declare, at start; a restart keeps the usage and
// the schedule.
func TestFlowsRegistersBudgetsAndQuotas(t *testing.T) {
	data := t.TempDir()
	args := []string{"dev", "--data", data, "--listen", "127.0.0.1:0", "--flows", "../../examples/flows"}
	r := start(t, args, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := client.New("http://" + r.api)
	b, err := c.GetBudget(ctx, "llm/llm_daily")
	if err != nil {
		t.Fatal(err)
	}
	if b.Scope != "shared" || b.OnHardLimit != "block" || b.ResetMs != 24*3600*1000 || len(b.Dimensions) != 2 || b.Dimensions[0].Hard != 5_000_000 {
		t.Fatalf("registered budget: %+v", b)
	}
	// Run-scoped budgets exist per run only.
	if _, err := c.GetBudget(ctx, "llm/tokens_per_run"); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("run-scoped budget registered at start: %v", err)
	}
	q, err := c.GetQuota(ctx, "llm/model_api")
	if err != nil {
		t.Fatal(err)
	}
	if q.Rate != 60 || q.WindowMs != 60_000 || q.Concurrency != 8 || q.JitterMs != 250 || q.Key != "tenant" {
		t.Fatalf("registered quota: %+v", q)
	}
	if q, err := c.GetQuota(ctx, "etl/warehouse_writes"); err != nil || q.Concurrency != 2 {
		t.Fatalf("etl quota: %+v %v", q, err)
	}
	// etl.ff's schedule, with its input as declared (placeholders kept).
	sc, err := c.GetSchedule(ctx, "nightly")
	if err != nil || sc.Template != "nightly_etl" || sc.Cron != "0 2 * * *" || sc.Timezone != "Europe/Berlin" ||
		sc.Namespace != "etl" || string(sc.Input) != `{"source":"clickstream","day":"{{fire_date-1}}"}` || sc.NextAt == nil {
		t.Fatalf("registered schedule: %+v (input %s), %v", sc, sc.Input, err)
	}
	if _, err := c.ReportBudgetUsage(ctx, "llm/llm_daily", wire.BudgetUsageReport{Dimension: "tokens", Delta: 1234}); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	r = start(t, args, nil)
	c, _ = client.New("http://" + r.api)
	b, err = c.GetBudget(ctx, "llm/llm_daily")
	if err != nil {
		t.Fatal(err)
	}
	if b.Dimensions[0].Used != 1234 {
		t.Fatalf("after a restart the usage is %d, want 1234 (kept)", b.Dimensions[0].Used)
	}
	if again, err := c.GetSchedule(ctx, "nightly"); err != nil || !again.UpdatedAt.Equal(*sc.UpdatedAt) {
		t.Fatalf("after a restart the schedule is %+v, %v; want it left as it was (updated %v)", again, err, sc.UpdatedAt)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

func isStatus(err error, status int) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == status
}
