package metrics

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func write(t *testing.T, r *Registry) (string, error) {
	t.Helper()
	var b bytes.Buffer
	err := r.Write(context.Background(), &b)
	return b.String(), err
}

func TestWriteFormat(t *testing.T) {
	r := NewRegistry()
	reqs := r.Counter("x_requests_total", "Requests by route.\nSecond line with a \\ backslash.", "route", "code")
	reqs.Inc("/b", "200")
	reqs.Add(3, "/a", "200")
	reqs.Inc("/a", "404")
	dur := r.Histogram("x_duration_seconds", "Durations.", []float64{0.1, 1}, "route")
	dur.Observe(0.1, "/a") // on a bound: counts in that bucket (le)
	dur.Observe(0.5, "/a")
	dur.Observe(7, "/a")
	r.AddCollector(func(context.Context) []GaugeFamily {
		return []GaugeFamily{
			{Name: "x_queue", Help: "Queue depth.", Labels: []string{"lane"}, Samples: []Sample{
				{Values: []string{`odd "lane"` + "\n" + `\x`}, Value: 2},
				{Values: []string{"plain"}, Value: 0.5},
			}},
			{Name: "a_up", Help: "Up.", Samples: []Sample{{Value: 1}}},
		}
	})
	got, err := write(t, r)
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_up Up.
# TYPE a_up gauge
a_up 1
# HELP x_duration_seconds Durations.
# TYPE x_duration_seconds histogram
x_duration_seconds_bucket{route="/a",le="0.1"} 1
x_duration_seconds_bucket{route="/a",le="1"} 2
x_duration_seconds_bucket{route="/a",le="+Inf"} 3
x_duration_seconds_sum{route="/a"} 7.6
x_duration_seconds_count{route="/a"} 3
# HELP x_queue Queue depth.
# TYPE x_queue gauge
x_queue{lane="odd \"lane\"\n\\x"} 2
x_queue{lane="plain"} 0.5
# HELP x_requests_total Requests by route.\nSecond line with a \\ backslash.
# TYPE x_requests_total counter
x_requests_total{route="/a",code="200"} 3
x_requests_total{route="/a",code="404"} 1
x_requests_total{route="/b",code="200"} 1
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
	if n := reqs.Value("/a", "200"); n != 3 {
		t.Errorf("Value = %d, want 3", n)
	}
	if n := dur.Count("/a"); n != 3 {
		t.Errorf("Count = %d, want 3", n)
	}
	if n := dur.Count("/none"); n != 0 {
		t.Errorf("Count of a series never observed = %d", n)
	}
}

// A collected family that is malformed or takes a registered name is left
// out and reported; everything else is still written.
func TestWriteSkipsBadCollectedFamilies(t *testing.T) {
	r := NewRegistry()
	r.Counter("x_total", "X.").Inc()
	r.AddCollector(func(context.Context) []GaugeFamily {
		return []GaugeFamily{
			{Name: "x_total", Help: "Clash."},
			{Name: "bad-name", Help: "Bad."},
			{Name: "x_wrong", Help: "Wrong arity.", Labels: []string{"a"}, Samples: []Sample{{Value: 1}}},
			{Name: "x_ok", Help: "Fine.", Samples: []Sample{{Value: 4}}},
		}
	})
	got, err := write(t, r)
	if err == nil {
		t.Fatal("Write reported no error for bad collected families")
	}
	for _, s := range []string{"x_total", "bad-name", "x_wrong"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	want := "# HELP x_ok Fine.\n# TYPE x_ok gauge\nx_ok 4\n# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n"
	if got != want {
		t.Errorf("written:\n%s\nwant:\n%s", got, want)
	}
}

func TestRegistrationMistakesPanic(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"twice":          func(r *Registry) { r.Counter("a_total", ""); r.Counter("a_total", "") },
		"bad name":       func(r *Registry) { r.Counter("a-total", "") },
		"bad label":      func(r *Registry) { r.Counter("a_total", "", "1x") },
		"reserved label": func(r *Registry) { r.Counter("a_total", "", "__x") },
		"le label":       func(r *Registry) { r.Histogram("a", "", []float64{1}, "le") },
		"many labels":    func(r *Registry) { r.Counter("a_total", "", "a", "b", "c", "d", "e") },
		"arity":          func(r *Registry) { r.Counter("a_total", "", "a").Inc() },
		"no bounds":      func(r *Registry) { r.Histogram("a", "", nil) },
		"unsorted":       func(r *Registry) { r.Histogram("a", "", []float64{2, 1}) },
		"repeated bound": func(r *Registry) { r.Histogram("a", "", []float64{1, 1}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f(NewRegistry())
		})
	}
}

// Counting from many goroutines while the registry is written loses
// nothing (run with -race).
func TestConcurrentUse(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "C.", "k")
	h := r.Histogram("h_seconds", "H.", []float64{1}, "k")
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := []string{"even", "odd"}[w%2]
			for range each {
				c.Inc(k)
				h.Observe(0.5, k)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			if _, err := write(t, r); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	<-done
	for _, k := range []string{"even", "odd"} {
		if n := c.Value(k); n != workers/2*each {
			t.Errorf("counter %s = %d, want %d", k, n, workers/2*each)
		}
		if n := h.Count(k); n != workers/2*each {
			t.Errorf("histogram %s count = %d, want %d", k, n, workers/2*each)
		}
	}
	got, _ := write(t, r)
	if !strings.Contains(got, `h_seconds_sum{k="odd"} 2000`+"\n") {
		t.Errorf("histogram sum not 2000:\n%s", got)
	}
}

func BenchmarkCounterInc(b *testing.B) {
	r := NewRegistry()
	c := r.Counter("c_total", "C.", "method", "route", "code")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc("POST", "/v1/worker/complete", "200")
		}
	})
}
