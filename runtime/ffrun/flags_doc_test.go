package ffrun_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/ffrun"
)

// TestFlagsDocumented: every flag of ffrun serve and dev, and its
// environment variable, is in the flag table of spec/api.md.
func TestFlagsDocumented(t *testing.T) {
	spec, err := os.ReadFile("../../spec/api.md")
	if err != nil {
		t.Fatal(err)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	envName := regexp.MustCompile(`\(env (FF_[A-Z_]+)\)`)
	for _, cmd := range []string{"serve", "dev"} {
		var help bytes.Buffer
		if err := ffrun.Run(context.Background(), []string{cmd, "-h"}, ffrun.Env{Stderr: &help}); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		flags := flagLine.FindAllStringSubmatch(help.String(), -1)
		envs := envName.FindAllStringSubmatch(help.String(), -1)
		if len(flags) < 10 || len(envs) != len(flags) {
			t.Fatalf("%s -h: %d flags and %d environment variables found in\n%s", cmd, len(flags), len(envs), help.String())
		}
		for _, f := range flags {
			if !regexp.MustCompile("`--" + regexp.QuoteMeta(f[1]) + "[` ]").Match(spec) {
				t.Errorf("ffrun %s --%s is not in spec/api.md", cmd, f[1])
			}
		}
		for _, e := range envs {
			want := "`" + e[1] + "`"
			if strings.HasPrefix(e[1], "FF_SCAN_") {
				want = "`FF_SCAN_…`" // one row for the scanner intervals
			}
			if !strings.Contains(string(spec), want) {
				t.Errorf("ffrun %s: %s is not in spec/api.md", cmd, e[1])
			}
		}
	}
}

// TestServeUsageSynopsis: ffrun serve -h and dev -h began with "Usage of
// ffrun serve:", the flag package's header, which says nothing of how to
// call the command. They now begin with its synopsis, as ffrun help
// lists it and as the client commands' -h do, then the flags.
func TestServeUsageSynopsis(t *testing.T) {
	var help bytes.Buffer
	if err := ffrun.Run(context.Background(), []string{"help"}, ffrun.Env{Stdout: &help}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cmd, synopsis string }{
		{"serve", "ffrun serve --valkey ADDR [flags]"},
		{"dev", "ffrun dev [--data DIR] [flags]"},
	} {
		if !strings.Contains(help.String(), "\n  "+c.synopsis+"  ") {
			t.Errorf("ffrun help does not list %q:\n%s", c.synopsis, help.String())
		}
		var out bytes.Buffer
		if err := ffrun.Run(context.Background(), []string{c.cmd, "-h"}, ffrun.Env{Stderr: &out}); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", c.cmd, err)
		}
		if want := "usage: " + c.synopsis + "\n\nflags:\n  -"; !strings.HasPrefix(out.String(), want) {
			t.Errorf("ffrun %s -h:\n%s\nwant it to begin with %q", c.cmd, out.String(), want)
		}
	}
}

// TestMistypedFlagShort: a flag serve or dev does not know is answered
// with its error and the synopsis, exit 2; the sixty lines of flags are
// for -h (they were printed, the error above and below them).
func TestMistypedFlagShort(t *testing.T) {
	for _, cmd := range []string{"serve", "dev"} {
		var stdout, stderr bytes.Buffer
		if code := ffrun.Main([]string{cmd, "--bogus"}, nil, &stdout, &stderr); code != 2 {
			t.Fatalf("%s --bogus: exit %d, want 2", cmd, code)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "flag provided but not defined: -bogus") ||
			!strings.HasPrefix(lines[1], "usage: ffrun "+cmd+" ") || !strings.Contains(lines[1], "ffrun "+cmd+" -h") {
			t.Errorf("ffrun %s --bogus wrote:\n%s\nwant the error, then the synopsis and where the flags are listed", cmd, stderr.String())
		}
	}
}
