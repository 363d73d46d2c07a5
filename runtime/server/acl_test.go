package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/worker"
)

// leastPrivilege is the ACL rule spec/api.md (Deploying) recommends for the
// user of an ffrun with key prefix "acl:": its keys and channels only,
// every command but the dangerous ones, and of those INFO (the server's
// version) and ROLE (a cluster's primaries).
var leastPrivilege = []string{"on", ">ffpw", "resetkeys", "~acl:*", "resetchannels", "&acl:*", "-@all", "+@all", "-@dangerous", "+role", "+info"}

// TestLeastPrivilegeUser: ffrun runs a flow end to end, serves its metrics,
// runs every scanner and deletes an idle library version as a user with
// only the recommended ACL rule, and the server logs no refusal. Without
// +info the same user cannot start: the rule is enforced.
func TestLeastPrivilegeUser(t *testing.T) {
	t.Parallel()
	vk, err := valkeytest.Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vk.Stop)
	ctx := ctxT(t)
	admin := valkeytest.Client(t, vk.Addr)
	setUser := func(rule []string) {
		t.Helper()
		args := append([]string{"ACL", "SETUSER", "ffrun", "reset"}, rule...)
		if err := admin.Do(ctx, admin.B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
	}
	asUser := func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "acl:"
		c.ValkeyUsername, c.ValkeyPassword = "ffrun", "ffpw"
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Unblock = 50 * time.Millisecond
		c.Scanners.BudgetReset = 50 * time.Millisecond
		c.Scanners.QuotaRelease = 50 * time.Millisecond
		c.Scanners.QuotaReconcile = 50 * time.Millisecond
		c.Scanners.Library = 50 * time.Millisecond
		c.Scanners.RunResume = 50 * time.Millisecond
	}

	// Without +info: refused at Open, and the server says why.
	setUser(leastPrivilege[:len(leastPrivilege)-1])
	cfg := server.Config{Scanners: servertest.FastScanners, Logger: servertest.Logger(t)}
	asUser(&cfg)
	if _, err := server.Open(ctx, cfg); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Open without +info = %v, want a NOPERM refusal", err)
	}
	admin.Do(ctx, admin.B().AclLog().Reset().Build())

	// A library version of an earlier release, idle for long: the
	// restricted user deletes it at Open.
	const old = "00000000000000ff"
	if err := admin.Do(ctx, admin.B().FunctionLoad().FunctionCode(strings.ReplaceAll(lua.Source(), lua.Version(), old)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	idle := strconv.FormatInt(time.Now().Add(-store.LibraryIdleAfter-time.Minute).UnixMilli(), 10)
	admin.Do(ctx, admin.B().Hset().Key("acl:ff:libraries").FieldValue().FieldValue(old, idle).Build())

	setUser(leastPrivilege)
	env := servertest.Start(t, asUser)
	runWorker(t, env, worker.Config{Name: "w", Concurrency: 2}, map[string]worker.Handler{
		"two.a": func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil },
		"two.b": func(context.Context, *worker.Task) (json.RawMessage, error) {
			return json.RawMessage(`{"s":"done"}`), nil
		},
	})
	run, err := env.Client.StageTemplate(ctx, "two", map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Client.RunResult(ctx, run.ID, 20*time.Second)
	if err != nil || res.State != "succeeded" || string(res.Result) != `{"s":"done"}` {
		t.Fatalf("run as the restricted user: %+v, %v", res, err)
	}
	if _, err := admin.Do(ctx, admin.B().Fcall().Function("ff_version_"+old).Numkeys(0).Build()).ToString(); err == nil {
		t.Error("the idle library version was not deleted")
	}

	// Every scanner ticks without an error.
	var m map[string]float64
	for deadline := time.Now().Add(20 * time.Second); ; {
		m = scrape(t, env, "")
		ticked := true
		for _, sc := range []string{"lease_expiry", "delayed", "attempt_timeout", "deadline", "retention", "unblock", "budget_reset", "quota_release", "quota_reconcile", "library", "run_resume"} {
			ticked = ticked && m[`ff_scanner_ticks_total{scanner="`+sc+`"}`] >= 2
		}
		if ticked || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for series, v := range m {
		if strings.HasPrefix(series, "ff_scanner_ticks_total") && v < 2 || strings.HasPrefix(series, "ff_scanner_tick_errors_total") && v != 0 {
			t.Errorf("%s = %v", series, v)
		}
	}
	if m["ff_valkey_up"] != 1 {
		t.Errorf("ff_valkey_up = %v", m["ff_valkey_up"])
	}
	log, err := admin.Do(ctx, admin.B().AclLog().Count(100).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 0 {
		var refused []string
		for _, e := range log {
			em, _ := e.AsStrMap()
			refused = append(refused, em["reason"]+" "+em["object"])
		}
		t.Errorf("the server refused the restricted user %d time(s): %v", len(log), refused)
	}
}
