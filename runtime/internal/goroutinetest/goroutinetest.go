// Package goroutinetest finds the goroutines a test started and left
// running, by pprof label: a test runs what it checks under
// pprof.Do(ctx, pprof.Labels(key, value), ...), and every goroutine
// started from there carries the label (goroutines inherit their
// creator's labels), those of the libraries it calls too.
package goroutinetest

import (
	"bytes"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Labelled returns how many goroutines carry the label key=value, and
// their stacks.
func Labelled(t testing.TB, key, value string) (int, string) {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	want := strconv.Quote(key) + ":" + strconv.Quote(value)
	n := 0
	var stacks []string
	// One entry per distinct stack: "N @ 0x... 0x...\n# labels: {...}\n#\t...".
	for entry := range strings.SplitSeq(b.String(), "\n\n") {
		if !strings.Contains(entry, "# labels: ") || !strings.Contains(entry, want) {
			continue
		}
		head, _, _ := strings.Cut(entry, " @ ")
		c, err := strconv.Atoi(strings.TrimSpace(head[strings.LastIndex(head, "\n")+1:]))
		if err != nil {
			c = 1
		}
		n += c
		stacks = append(stacks, entry)
	}
	return n, strings.Join(stacks, "\n\n")
}

// WaitNone waits for the goroutines labelled key=value to end (a goroutine
// that closed the channel its Stop waits on still has to return), and
// fails t with their stacks when some are left after within, a bound
// generous enough for a loaded machine: what it checks is that they end,
// not how fast.
func WaitNone(t testing.TB, key, value string, within time.Duration, after string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, stacks := Labelled(t, key, value)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutine(s) still run %s after %s:\n%s", n, within, after, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
