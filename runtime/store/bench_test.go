package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/valkey-io/valkey-go"
)

// serverCPU returns the server's used CPU (user+sys) from INFO cpu.
func serverCPU(tb testing.TB, c valkey.Client) time.Duration {
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// BenchmarkStoreLifecycle pushes b.N executions (100-byte payloads) through
// create → claim → complete directly on the store (no HTTP): 16 producers
// create one execution per call; 16 workers claim up to 16 per call and
// report completions in one FinishMany per claim. It reports tasks/s and
// the server's CPU per task, on a fresh server per run.
//
//	go test -run '^$' -bench StoreLifecycle -benchtime 20000x ./runtime/store/
func BenchmarkStoreLifecycle(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(ctx, Config{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", 100))
	const producers, workers, batch = 16, 16, 16
	n := b.N
	cpu0 := serverCPU(b, c)
	b.ResetTimer()
	start := time.Now()

	var created, done atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for created.Add(1) <= int64(n) {
				if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "noop", Payload: payload}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			benchWorker(b, s, w, int64(n), &done, nil, 100*time.Microsecond, func(p int, id WorkerIdentity) ([]Grant, error) {
				return s.Claim(ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: id, Max: batch})
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := serverCPU(b, c) - cpu0
	b.ReportMetric(float64(n)/elapsed.Seconds(), "tasks/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "server-µs/task")
}

// benchWorker is one benchmark worker: it claims with claim, round robin
// over the partitions from its own, sleeping idle after an empty claim,
// and finishes every grant with result in one FinishMany, until done
// reaches total.
func benchWorker(b *testing.B, s *Store, w int, total int64, done *atomic.Int64, result []byte, idle time.Duration,
	claim func(p int, id WorkerIdentity) ([]Grant, error)) {
	ctx := context.Background()
	id := WorkerIdentity{WorkerID: "bench", InstanceID: "bench-" + strconv.Itoa(w), Namespace: "default"}
	p := w % s.FlowPartitions()
	for done.Load() < total {
		grants, err := claim(p, id)
		if err != nil {
			b.Error(err)
			return
		}
		p = (p + 1) % s.FlowPartitions()
		if len(grants) == 0 {
			time.Sleep(idle)
			continue
		}
		items := make([]Finish, len(grants))
		for i, g := range grants {
			items[i] = Finish{Lease: g.Lease, Result: result}
		}
		res, err := s.FinishMany(ctx, items)
		if err != nil {
			b.Error(err)
			return
		}
		for _, r := range res {
			if r.Err != nil {
				b.Error(r.Err)
				return
			}
		}
		done.Add(int64(len(grants)))
	}
}

// fcallMicros returns the server time spent in FCALL so far (INFO
// commandstats) and resets the statistics.
func fcallMicros(tb testing.TB, c valkey.Client) float64 {
	ctx := context.Background()
	st, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	var usec float64
	for line := range strings.SplitSeq(st, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_fcall:"); ok {
			for kv := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					usec, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
				}
			}
		}
	}
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		tb.Fatal(err)
	}
	return usec
}

// BenchmarkStorePhases measures the server time of each FCALL per
// execution (INFO commandstats, Lua included) for create, claim (batches
// of 16), complete (batches of 16) and batched create (CreateMany of 16),
// one phase after the other on one partition.
//
//	go test -run '^$' -bench StorePhases -benchtime 4096x ./runtime/store/
func BenchmarkStorePhases(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(ctx, Config{Client: c, FlowPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", 100))
	n := b.N
	fcallMicros(b, c)
	for range n {
		if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "noop", Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	create := fcallMicros(b, c)
	var items []Finish
	w := WorkerIdentity{WorkerID: "bench", InstanceID: "bench-1", Namespace: "default"}
	for len(items) < n {
		g, err := s.Claim(ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 16})
		if err != nil || len(g) == 0 {
			b.Fatalf("claim: %d grants, %v", len(g), err)
		}
		for _, x := range g {
			items = append(items, Finish{Lease: x.Lease})
		}
	}
	claim := fcallMicros(b, c)
	for i := 0; i < n; i += 16 {
		if _, err := s.FinishMany(ctx, items[i:min(i+16, n)]); err != nil {
			b.Fatal(err)
		}
	}
	finish := fcallMicros(b, c)
	for i := 0; i < n; i += 16 {
		batch := make([]CreateRequest, min(16, n-i))
		for j := range batch {
			batch[j] = CreateRequest{Kind: "noop", Payload: payload}
		}
		if _, err := s.CreateMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	createBatch := fcallMicros(b, c)
	b.ReportMetric(create/float64(n), "create-µs/task")
	b.ReportMetric(createBatch/float64(n), "create16-µs/task")
	b.ReportMetric(claim/float64(n), "claim-µs/task")
	b.ReportMetric(finish/float64(n), "complete-µs/task")
}
