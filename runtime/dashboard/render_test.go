package dashboard

import (
	"testing"
	"time"
)

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                            "0s",
		1500 * time.Nanosecond:                  "2µs",
		1234567 * time.Nanosecond:               "1.2ms",
		1234567890 * time.Nanosecond:            "1.23s",
		time.Minute:                             "1m",
		90 * time.Second:                        "1m30s",
		time.Hour:                               "1h",
		90 * time.Minute:                        "1h30m",
		24*time.Hour + 29*time.Second:           "24h",
		59*time.Minute + 59*time.Second:         "59m59s",
		59*time.Minute + 59500*time.Millisecond: "1h",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/runs/1?done=x":        "/ui/runs/1?done=x",
		"/ui/templates":            "/ui/templates",
		"":                         "/ui/runs",
		"/ui":                      "/ui/runs",
		"//evil.example/ui/":       "/ui/runs",
		"/ui/\\evil":               "/ui/runs",
		"https://evil/ui/":         "/ui/runs",
		"/v1/flows":                "/ui/runs",
		"/ui/../v1/flows":          "/ui/runs",
		"/ui/..":                   "/ui/runs",
		"/ui/./../metrics":         "/ui/runs",
		"/ui/runs/../../x":         "/ui/runs",
		"/ui//evil":                "/ui/runs",
		"/ui/runs/":                "/ui/runs/",
		"/ui/x\r\nSet-Cookie: a=b": "/ui/runs",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
