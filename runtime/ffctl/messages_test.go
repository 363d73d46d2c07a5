package ffctl_test

import (
	"strings"
	"testing"
)

// TestUnknownTemplateMessage: `ffrun start greett` (a typo) printed
//
//	ffrun start: client: stage template greett: ffrun: 404 not_found: no such template "greett" (GET /v1/templates lists them)
//
// sending a user of the command line to an HTTP route, with the client's
// layers of context and no suggestion although the server serves "greet".
// The message now names the close template and points to `ffrun
// templates`, without the client's prefixes.
func TestUnknownTemplateMessage(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	r := e.run("", "start", "greett", "--input", `{"who":"ada"}`)
	if r.code != 1 {
		t.Fatalf("ffrun start greett = exit %d, want 1: %q", r.code, r.stderr)
	}
	want := `ffrun start: 404 not_found: no such template "greett"; did you mean "greet"? (ffrun templates lists them)`
	if got := strings.TrimSpace(r.stderr); got != want {
		t.Errorf("ffrun start greett:\n got %s\nwant %s", got, want)
	}
}

// TestSubcommandUsageNamesOperands: `ffrun get -h` printed "Usage of
// ffrun get:" and its flags, but not that it takes a RUN. Each client
// command's -h now starts with its synopses, as ffrun help lists them.
func TestSubcommandUsageNamesOperands(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ cmd, synopsis string }{
		{"get", "usage: ffrun get RUN\n"},
		{"watch", "usage: ffrun watch RUN\n"},
		{"result", "usage: ffrun result RUN [--wait D]\n"},
		{"cancel", "usage: ffrun cancel RUN [--reason R]\n       ffrun cancel --all [--flow F] [--reason R]\n"},
		{"replay", "usage: ffrun replay RUN [--watch]\n"},
		{"start", "usage: ffrun start TEMPLATE [--input JSON|@FILE|-] [--key K] [--watch | --wait D]\n"},
		{"templates", "usage: ffrun templates\n"},
	} {
		r := runWith(t, nil, "", c.cmd, "-h")
		if r.code != 0 || !strings.HasPrefix(r.stderr, c.synopsis) || !strings.Contains(r.stderr, "-server") {
			t.Errorf("ffrun %s -h = exit %d:\n%s\nwant exit 0, the synopsis %q first, then the flags", c.cmd, r.code, r.stderr, c.synopsis)
		}
	}
	r := runWith(t, nil, "", "schedules", "run", "-h")
	if want := "usage: ffrun schedules run NAME [--key K] [--watch | --wait D]\n"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("ffrun schedules run -h:\n%s\nwant the synopsis %q first", r.stderr, want)
	}
}
