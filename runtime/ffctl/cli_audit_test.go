package ffctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/wire"
)

// Flags may come before the run subcommand of ffrun schedules, as before
// any operand (it was recognised only as the very first argument).
func TestSchedulesRunFlagsFirst(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	if _, _, err := e.srv.Client.PutSchedule(context.Background(), "yearly", wire.PutSchedule{Template: "greet", Cron: "0 5 1 1 *",
		Input: json.RawMessage(`{"who":"team"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--json", "run", "yearly"},
		{"--server", e.srv.URL, "run", "yearly"},
	} {
		r := e.run("", "schedules", args...)
		started := strings.Contains(r.stdout, `"schedule_manual": true`) || strings.HasPrefix(r.stdout, "run ")
		if r.code != 0 || !started {
			t.Errorf("ffrun schedules %s = exit %d, stdout %q, stderr %q; want the run started, as with the flags after run",
				strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}

// ffrun templates --json prints the API's answer, {"templates": [...]}, as
// every other listing command prints its route's object (it printed a
// bare array).
func TestTemplatesJSONIsTheAPIAnswer(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	r := e.run("", "templates", "--json")
	var got wire.TemplateList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got.Templates) != 2 {
		t.Fatalf("ffrun templates --json = exit %d:\n%s\nwant the API's answer, {\"templates\": [...]} with greet and wide", r.code, r.stdout)
	}
}
