package ffctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/wire"
)

// queryLog is a transport that records the query of every GET of a run.
type queryLog struct {
	mu      sync.Mutex
	queries []string
}

func (l *queryLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/flows/") {
		l.mu.Lock()
		l.queries = append(l.queries, r.URL.RawQuery)
		l.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (l *queryLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries...)
}

// TestFollowLargeRun: Follow of a run of more than one page (1,001
// members) follows its counts and its failures, each poll after the first
// asking for one member, and prints no line per member.
func TestFollowLargeRun(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "big", Namespace: "default", Lane: "default"}
	for i := range 1001 {
		f.Execs = append(f.Execs, plan.Exec{Name: fmt.Sprintf("m%04d", i), Kind: fmt.Sprintf("big.m%04d", i), Lane: "default", Priority: plan.PriorityDefault,
			InputFrom: plan.InputNone, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := e.srv.Client.StageFlow(ctx, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := &queryLog{}
	c, err := client.New(e.srv.URL, client.WithToken(e.token), client.WithHTTPClient(&http.Client{Transport: log}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	type followed struct {
		run *wire.FlowRun
		err error
	}
	done := make(chan followed, 1)
	go func() {
		r, err := ffctl.Follow(ctx, w, c, run.ID, ffctl.FollowOptions{Interval: 5 * time.Millisecond})
		done <- followed{r, err}
	}()
	// Once Follow polls, one member fails; then the run is cancelled.
	for len(log.all()) < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	tasks, err := e.srv.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %+v %v", tasks, err)
	}
	l := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	if _, err := e.srv.Client.FailOne(ctx, l, "it broke", false); err != nil {
		t.Fatal(err)
	}
	// (A poll may read the counts before the failure and the failures
	// after it: the next poll has both.)
	for !strings.Contains(func() string { mu.Lock(); defer mu.Unlock(); return out.String() }(), " 1 of 1001 done") {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.srv.Client.CancelRun(ctx, run.ID, "enough"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.run.State != wire.RunCancelled || got.run.Execs != nil {
		t.Fatalf("Follow = %+v, %v", got.run, got.err)
	}
	mu.Lock()
	text := out.String()
	mu.Unlock()
	for _, want := range []string{
		`(?m)\A *\d+ms  run of 1001 members: following its counts and failures$`,
		`(?m)^ *\d+ms  0 of 1001 done \(0 succeeded, 0 failed, 0 skipped, 0 cancelled\)$`,
		`(?m)^ *\d+ms  m\d{4}  failed: it broke$`,
		`(?m)^ *\d+ms  1 of 1001 done \(0 succeeded, 1 failed, 0 skipped, 0 cancelled\)$`,
		`(?m)^ *\d+ms  run cancelled \(0 succeeded, 1 failed, 0 skipped, 1000 cancelled\)\n\z`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("Follow's output lacks %s:\n%s", want, text)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^ *\d+ms  m\d{4}  `).FindAllString(text, -1)); n != 1 {
		t.Errorf("Follow printed %d lines about members, want 1 (the failure):\n%s", n, text)
	}
	queries := log.all()
	for i, q := range queries {
		if want := map[bool]string{true: "", false: "execs_limit=1"}[i == 0]; q != want {
			t.Fatalf("request %d of %d asked %q, want %q", i, len(queries), q, want)
		}
	}
}

// TestFollowShowsThatAMemberRan: ffrun watch (and start --watch) read the
// run every 200 ms and print the difference between two reads. A member
// claimed and ended between two reads, the common case for a handler
// shorter than the interval, was printed as "validate  pending -> failed:
// …", which reads as if it failed without ever running, like a member
// skipped or expired while pending. When a read finds a member past an
// attempt it was not seen making, the line says that it ran: "waiting ->
// active (attempt 1) -> completed". Here a member is claimed and completed
// between two reads three seconds apart.
func TestFollowShowsThatAMemberRan(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := e.srv.Client.StageTemplate(ctx, "greet", name{"ada"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.srv.URL, client.WithToken(e.token), client.WithHTTPClient(&http.Client{Transport: &queryLog{}}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out bytes.Buffer
	text := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	done := make(chan error, 1)
	go func() {
		_, err := ffctl.Follow(ctx, w, c, run.ID, ffctl.FollowOptions{Interval: 3 * time.Second})
		done <- err
	}()
	for !strings.Contains(text(), "hello  staged -> waiting") {
		if ctx.Err() != nil {
			t.Fatalf("Follow's first read never came:\n%s", text())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Between the first read and the next: hello is claimed and completed.
	tasks, err := e.srv.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %+v %v", tasks, err)
	}
	l := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	if _, err := e.srv.Client.CompleteOne(ctx, l, json.RawMessage(`{"who":"hello ada"}`)); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(text(), "-> completed") {
		if ctx.Err() != nil {
			t.Fatalf("Follow never saw hello complete:\n%s", text())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.srv.Client.CancelRun(ctx, run.ID, "enough"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Follow: %v", err)
	}
	line := regexp.MustCompile(`(?m)^.*hello .*-> completed.*$`).FindString(text())
	if !strings.Contains(line, "waiting -> active (attempt 1) -> completed") {
		t.Errorf("the line of hello's end is %q: it does not say that hello ran (active, attempt 1); the whole output:\n%s", line, text())
	}
}
