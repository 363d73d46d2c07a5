// Command asynq measures asynq (github.com/hibiken/asynq) on ffbench's
// backlog scenario, so that ffrun can be compared with it on the same
// machine at the same time (the figures of a shared machine drift by tens
// of per cent within minutes): 10,000 no-op tasks with a 100-byte payload
// from 16 producers, 16 worker goroutines, a fresh redis-server (from
// PATH, no persistence) per run. It prints tasks/s and Redis CPU per task
// (INFO cpu delta / tasks).
//
//	go run .           # enqueue while the server runs, as ffbench's backlog
//	go run . prefill   # enqueue first (reported apart), then process
//
// It is a module of its own so that asynq never becomes a dependency of
// FlowFabric.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

func main() {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, _ := os.MkdirTemp("", "peer")
	defer os.RemoveAll(dir)
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	for rc.Ping(context.Background()).Err() != nil {
		time.Sleep(20 * time.Millisecond)
	}
	const tasks, producers = 10000, 16
	payload := []byte(strings.Repeat("x", 100))
	var done atomic.Int64
	finished := make(chan struct{})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr}, asynq.Config{Concurrency: 16, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(ctx context.Context, t *asynq.Task) error {
		if done.Add(1) == tasks {
			close(finished)
		}
		return nil
	})
	prefill := len(os.Args) > 1 && os.Args[1] == "prefill"
	if !prefill {
		if err := srv.Start(mux); err != nil {
			panic(err)
		}
	}
	cli := asynq.NewClient(asynq.RedisClientOpt{Addr: addr})
	cpu0 := redisCPU(rc)
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= tasks {
				if _, err := cli.Enqueue(asynq.NewTask("noop", payload)); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	if prefill {
		enq, enqCPU := time.Since(start), redisCPU(rc)-cpu0
		fmt.Printf("asynq enqueue  tasks/s=%.0f redis_cpu %.1f µs/task\n", tasks/enq.Seconds(), float64(enqCPU.Microseconds())/tasks)
		cpu0, start = redisCPU(rc), time.Now()
		if err := srv.Start(mux); err != nil {
			panic(err)
		}
	}
	<-finished
	elapsed := time.Since(start)
	cpu := redisCPU(rc) - cpu0
	srv.Shutdown()
	what := "backlog"
	if prefill {
		what = "process"
	}
	fmt.Printf("asynq %s tasks=%d elapsed=%s tasks/s=%.0f redis_cpu=%s (%.1f µs/task)\n",
		what, tasks, elapsed.Round(time.Millisecond), tasks/elapsed.Seconds(), cpu.Round(time.Millisecond), float64(cpu.Microseconds())/tasks)
}

func redisCPU(rc *redis.Client) time.Duration {
	info, err := rc.Info(context.Background(), "cpu").Result()
	if err != nil {
		panic(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
