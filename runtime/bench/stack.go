package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/server"
)

// benchToken is the API token of every benchmark server: auth is on, as
// in production.
const benchToken = "ffbench-token-0123"

// stackConfig says how to start a stack.
type stackConfig struct {
	ValkeyBin  string
	Partitions int
	AOF        bool              // persistence on the Valkey child
	TCP        bool              // ffrun reaches the child over TCP loopback, not its Unix socket
	Templates  []*plan.Flow      // served as templates
	Transport  http.RoundTripper // the client's transport; nil = pooledTransport()
}

// stack is one benchmark run's private deployment: a fresh Valkey/Redis
// child, an in-process ffrun on a loopback port, an API client for it and
// a direct Valkey client for INFO readings.
type stack struct {
	Client *client.Client
	Valkey valkey.Client
	Logger *slog.Logger // warnings and errors to stderr
	stop   []func()
}

// startStack starts a stack; Close stops it. ctx bounds the server's life.
func startStack(ctx context.Context, cfg stackConfig) (_ *stack, err error) {
	s := &stack{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	dir, err := os.MkdirTemp("", "ffbench-")
	if err != nil {
		return nil, err
	}
	s.onClose(func() { os.RemoveAll(dir) })
	child, err := devserver.Start(ctx, devserver.Config{Binary: cfg.ValkeyBin, Dir: dir, NoPersistence: !cfg.AOF})
	if err != nil {
		return nil, err
	}
	s.onClose(func() { child.Stop(context.Background()) })

	// As ffrun dev does, ffrun reaches its co-located child over the Unix
	// socket unless told otherwise.
	valkeyAddr := child.ClientAddr()
	if cfg.TCP {
		valkeyAddr = child.Addr
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	srv, err := server.Open(srvCtx, server.Config{
		ValkeyAddr: valkeyAddr, FlowPartitions: cfg.Partitions, Token: benchToken, Templates: cfg.Templates,
		Logger: s.Logger,
	})
	if err != nil {
		stopSrv()
		return nil, fmt.Errorf("open ffrun: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopSrv()
		srv.Close()
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(srvCtx, ln) }()
	s.onClose(func() { stopSrv(); <-served })

	rt := cfg.Transport
	if rt == nil {
		rt = pooledTransport()
	}
	if s.Client, err = client.New("http://"+ln.Addr().String(), client.WithHTTPClient(&http.Client{Transport: rt}), client.WithToken(benchToken)); err != nil {
		return nil, err
	}
	if s.Valkey, err = valkey.NewClient(valkey.ClientOption{InitAddress: []string{child.Addr}, DisableCache: true}); err != nil {
		return nil, err
	}
	s.onClose(s.Valkey.Close)
	return s, nil
}

func (s *stack) onClose(f func()) { s.stop = append(s.stop, f) }

// Close stops everything startStack started, last started first.
func (s *stack) Close() {
	for i := len(s.stop) - 1; i >= 0; i-- {
		s.stop[i]()
	}
	s.stop = nil
}

// pooledTransport is the transport request-counting wrappers sit on.
func pooledTransport() http.RoundTripper {
	return &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
}

// transport names how ffrun reaches Valkey, for the report header.
func transport(tcp bool) string {
	if tcp {
		return "tcp"
	}
	return "unix socket"
}

// printLoad writes the load average: the machine's other work moves every
// figure, so each report says how busy it was.
func printLoad(out io.Writer) {
	la, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	if f := strings.Fields(string(la)); len(f) >= 3 {
		fmt.Fprintf(out, "ffbench: load average %s (other processes share the CPUs: figures vary with it)\n", strings.Join(f[:3], " "))
	}
}
