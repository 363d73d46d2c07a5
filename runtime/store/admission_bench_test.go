package store

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// BenchmarkStoreAdmission pushes b.N executions that count against a
// budget and need a quota (cap high enough never to deny) through the
// scheduler's admission cycle on the store: CreateMany of 16, then 16
// workers each claiming up to 16 with ClaimAdmitted (breached budgets read
// once per 16 claims), completing with FinishMany, while one goroutine
// drains the quota release queues. It reports tasks/s and the server's CPU
// per task (compare BenchmarkStoreLifecycle for the cost of admission), on
// a fresh server per run.
//
//	go test -run '^$' -bench StoreAdmission -benchtime 10000x ./runtime/store/
func BenchmarkStoreAdmission(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(ctx, Config{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.UpsertQuota(ctx, QuotaSpec{ID: "default/q", Concurrency: 1 << 30}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.UpsertBudget(ctx, BudgetSpec{ID: "default/b", Dimensions: []BudgetDimension{{Name: "n", Hard: 1 << 40}}}); err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", 100))
	n := b.N
	for i := 0; i < n; i += 16 {
		batch := make([]CreateRequest, min(16, n-i))
		for j := range batch {
			batch[j] = CreateRequest{Kind: "noop", Payload: payload, Quotas: []string{"q"}, Budgets: []string{"b"}}
		}
		if _, err := s.CreateMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := serverCPU(b, c)
	b.ResetTimer()
	start := time.Now()
	var done atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var drainer sync.WaitGroup
	drainer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for p := range s.FlowPartitions() {
				if _, err := s.DrainQuotaReleases(ctx, p, ScanLimitMax); err != nil {
					b.Error(err)
				}
			}
		}
	})
	for w := range 16 {
		wg.Go(func() {
			var breached []BudgetBreach
			i := 0
			benchWorker(b, s, w, int64(n), &done, nil, 100*time.Microsecond, func(p int, id WorkerIdentity) ([]Grant, error) {
				if i%16 == 0 { // as the scheduler does once per scan cycle
					var err error
					if breached, err = s.BreachedBudgets(ctx); err != nil {
						return nil, err
					}
				}
				i++
				return s.ClaimAdmitted(ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: id, Max: 16, BreachedBudgets: breached})
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	drainer.Wait()
	b.StopTimer()
	cpu := serverCPU(b, c) - cpu0
	b.ReportMetric(float64(n)/elapsed.Seconds(), "tasks/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "server-µs/task")
}
