package compiler

import (
	"slices"
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
	"github.com/google/go-cmp/cmp"
)

func TestParseInt(t *testing.T) {
	tests := []struct {
		text string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"42", 42, ""},
		{"-7", -7, ""},
		{"10_000", 10000, ""},
		{"1_000_000", 1000000, ""},
		{"9223372036854775807", 1<<63 - 1, ""},
		{"9223372036854775808", 0, "out of range"},
		{"1__0", 0, "`_` may only separate digits"},
		{"_1", 0, "`_` may only separate digits"},
		{"1_", 0, "`_` may only separate digits"},
		{"1.5", 0, "fractions are not allowed"},
		{"-", 0, "invalid integer"},
	}
	for _, tt := range tests {
		got, err := parseInt(tt.text)
		if tt.err == "" && (err != nil || got != tt.want) {
			t.Errorf("parseInt(%q) = %d, %v; want %d", tt.text, got, err, tt.want)
		}
		if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("parseInt(%q) error = %v, want %q", tt.text, err, tt.err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		text string
		want int64
		err  string
	}{
		{"100ms", 100, ""},
		{"30s", 30_000, ""},
		{"1m", 60_000, ""},
		{"24h", 86_400_000, ""},
		{"1h30m", 5_400_000, ""},
		{"1m30s500ms", 90_500, ""},
		{"1_000ms", 1000, ""},
		{"0s", 0, ""},
		{"30", 0, "missing unit (ms, s, m or h), e.g. 30s"},
		{"10x", 0, `unknown unit "x"`},
		{"5d", 0, `unknown unit "d"`},
		{"1.5s", 0, "fractions are not allowed"},
		{"-5s", 0, "cannot be negative"},
		{"1h_", 0, "missing unit"},
		{"9999999999999999h", 0, "too large"},
		{"s", 0, `expected a number before "s"`},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.text)
		if tt.err == "" && (err != nil || got != tt.want) {
			t.Errorf("parseDuration(%q) = %d, %v; want %d", tt.text, got, err, tt.want)
		}
		if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("parseDuration(%q) error = %v, want %q", tt.text, err, tt.err)
		}
	}
}

// TestUnreachable checks which execs the reachability analysis reports.
func TestUnreachable(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		never []string
	}{
		{"all reachable", "exec g() { join any }\na -> b\na -> c on failure\nb, c -> g on done\n", nil},
		// d needs both b and c to finish, but only one of them can run.
		{"done edges keep their upstream's needs", "a -> b\na -> c on failure\nb, c -> d on done\n", []string{"d"}},
		{"contradiction", "a -> b\na -> c on failure\nb, c -> d\n", []string{"d"}},
		{"contradiction through a chain", "a -> b -> e\na -> c on failure\ne, c -> d\n", []string{"d"}},
		{"join any tolerates it", "exec g() { join any }\na -> b\na -> c on failure\nb, c -> g\n", nil},
		{"done edges demand nothing", "a -> b on done\na -> c on failure\nb, c -> d\n", nil},
		{"cascade", "a -> b\na -> c on failure\nb, c -> d\nd -> e\n", []string{"d", "e"}},
		{"join any of dead upstreams", "exec g() { join any }\na -> b\na -> c on failure\nb, c -> d\nd -> g\n", []string{"d", "g"}},
		{"join count", "exec g() { join 2 }\na -> b\na -> c on failure\nb, c -> d\nd, e -> g\n", []string{"d", "g"}},
		{"independent branches", "a -> b\nc -> d on failure\nb, d -> e\n", nil},
		{"same outcome twice", "a -> b\na -> c\nb, c -> d\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "flow f() {\n exec a() {}\n exec b() {}\n exec c() {}\n exec d() {}\n exec e() {}\n" + tt.body + "}\n"
			pkg, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
			if pkg == nil {
				t.Fatalf("compile: %v", diags)
			}
			var got []string
			for _, d := range diags {
				if d.Code == dsl.CodeUnreachable {
					got = append(got, strings.Split(d.Message, `"`)[1])
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.never, got); diff != "" {
				t.Errorf("unreachable execs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatMs(t *testing.T) {
	tests := []struct {
		ms   int64
		want string
	}{
		{0, "0ms"},
		{250, "250ms"},
		{1_000, "1s"},
		{1_500, "1s500ms"},
		{90_000, "1m30s"},
		{3_600_000, "1h"},
		{3_661_001, "1h1m1s1ms"},
	}
	for _, tt := range tests {
		got := formatMs(tt.ms)
		if got != tt.want {
			t.Errorf("formatMs(%d) = %q, want %q", tt.ms, got, tt.want)
		}
		if back, err := parseDuration(got); err != nil || back != tt.ms {
			t.Errorf("parseDuration(%q) = %d, %v; want %d", got, back, err, tt.ms)
		}
	}
}
