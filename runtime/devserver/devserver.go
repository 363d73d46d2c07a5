// Package devserver runs a private valkey-server (or redis-server) child
// process for `ffrun dev`: found on PATH, started on a Unix socket in its
// data directory (and, unless Config.SocketOnly, a free local port), with
// append-only persistence, waited for while it loads its data, stopped
// with its parent.
package devserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults.
const (
	// StartTimeoutDefault is the default of Config.StartTimeout.
	StartTimeoutDefault = 10 * time.Second
	StopTimeoutDefault  = 10 * time.Second
)

// loadLogEvery is how often Start logs the progress of a child loading
// its data.
const loadLogEvery = 5 * time.Second

// Binaries are the server programs looked up on PATH, in order.
var Binaries = []string{"valkey-server", "redis-server"}

// FindBinary returns the first of Binaries found on PATH.
func FindBinary() (string, error) {
	for _, name := range Binaries {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("devserver: neither %s is on PATH; install Valkey or Redis (Debian: apt-get install redis-server) or run `ffrun serve --valkey ADDR`",
		strings.Join(Binaries, " nor "))
}

// Config configures Start.
type Config struct {
	Binary string // server program; default FindBinary()
	Dir    string // data directory (created); required
	Port   int    // 0 = a free port; not with SocketOnly
	// StartTimeout is how long the child may go without progress at
	// start: without answering at all, or, while it loads its data
	// (answering LOADING), without loading more of it. Default
	// StartTimeoutDefault. A child making progress is waited for (see
	// LoadTimeout): a large data set loads for minutes.
	StartTimeout time.Duration
	// LoadTimeout bounds the whole start, the load of the data included;
	// 0 = none: as long as the child makes progress.
	LoadTimeout time.Duration
	StopTimeout time.Duration
	Logger      *slog.Logger
	// SocketOnly makes the child listen on its Unix socket alone (mode
	// 700, in the data directory: this user's only), with no TCP port
	// another local user could reach, password-less as it is. When the
	// data directory's path is too long for a socket, the socket goes
	// into a private temporary directory instead (removed by Stop). Off,
	// the child also listens on 127.0.0.1 (Server.Addr), as the tests'
	// harness wants.
	SocketOnly bool
	// NoPersistence turns persistence off (benchmarks): no append-only
	// file, no snapshots.
	NoPersistence bool
	// ExtraArgs are appended to the server's command line (tests: cluster
	// mode).
	ExtraArgs []string
}

// socketPathMax is the longest Unix socket path every supported system
// accepts: sun_path holds 108 bytes on Linux and 104 on macOS and the
// BSDs, the last one a NUL.
const socketPathMax = 103

// Server is a running child server.
type Server struct {
	Addr string // 127.0.0.1:port; "" with Config.SocketOnly
	// Socket is the path of the child's Unix socket, in the data directory;
	// "" when that path is too long for a socket (with Config.SocketOnly,
	// a path in a private temporary directory then).
	Socket  string
	Binary  string
	Dir     string
	LogFile string

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stop    sync.Once
	unlock  sync.Once
	stopErr error
	cfg     Config
	lock    *os.File // the data directory's lock, released by Stop
	tempDir string   // the socket's private directory, removed by Stop; "" for none
}

// Start launches the child and waits until it answers PING: while it
// loads its data, as long as it makes progress (Config.StartTimeout,
// Config.LoadTimeout). A port another server holds (Config.Port, or a
// free port taken before the child bound it) is found by that server's
// process id: an error for Config.Port, another free port otherwise.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("devserver: Config.Dir is required")
	}
	if cfg.SocketOnly && cfg.Port != 0 {
		return nil, errors.New("devserver: Config.Port is set with Config.SocketOnly, which opens no port")
	}
	if cfg.LoadTimeout < 0 {
		return nil, fmt.Errorf("devserver: Config.LoadTimeout %s is negative (0 = no bound)", cfg.LoadTimeout)
	}
	if cfg.Binary == "" {
		b, err := FindBinary()
		if err != nil {
			return nil, err
		}
		cfg.Binary = b
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = StartTimeoutDefault
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = StopTimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("devserver: data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("devserver: data dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if cfg.SocketOnly {
		s, err := launch(ctx, cfg, dir, 0, lock)
		if err != nil {
			lock.Close()
		}
		return s, err
	}
	var lastErr error
	for range 3 { // another process may take the free port first
		port := cfg.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				lock.Close()
				return nil, err
			}
		}
		s, err := launch(ctx, cfg, dir, port, lock)
		if err == nil {
			return s, nil
		}
		lastErr = err
		// Another try only for a port lost to another process: a child
		// that hangs, stalls or loads for too long would do it again.
		if cfg.Port != 0 || ctx.Err() != nil || !errors.As(err, new(portLost)) {
			break
		}
	}
	lock.Close()
	return nil, lastErr
}

// LockFile is the name of the lock file in the data directory. While a
// child runs, its ffrun holds an exclusive flock on it (and the child
// inherits the lock, so it is held until both are gone); the file holds
// the pid of the ffrun that took it.
const LockFile = "ffrun.lock"

// lockDir takes the data directory's lock without waiting: two servers on
// one directory would share (and corrupt) its append-only file, log and
// socket.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = " (pid " + pid + ")"
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("devserver: data dir %s is in use by another ffrun dev%s; stop it or pick another --data dir", dir, holder)
		}
		return nil, fmt.Errorf("devserver: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// launch starts the child on port (0 with Config.SocketOnly: none) and
// waits for it (wait).
func launch(ctx context.Context, cfg Config, dir string, port int, lock *os.File) (*Server, error) {
	logFile := filepath.Join(dir, "server.log")
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", logFile,
	}
	socket, tempDir, err := socketPath(dir, cfg.SocketOnly)
	if err != nil {
		return nil, err
	}
	if socket != "" {
		args = append(args, "--unixsocket", socket, "--unixsocketperm", "700")
	}
	if cfg.NoPersistence {
		args = append(args, "--appendonly", "no", "--save", "")
	} else {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	// Sorted sets always as skip lists: ffrun's indexes (the leases, each
	// lane's eligible and pending members) hover at tens of entries, where a
	// listpack ZADD or ZREM scans and moves the whole set: about 19k server
	// instructions per member at 50 entries against 2.2k in a skip list
	// (scripts/lua-cost.sh: staging -9 %, a hand-off finish -6 %; spec/api.md
	// History 22). The memory it costs is per index, not per execution.
	args = append(args, "--zset-max-listpack-entries", "0")
	args = append(args, cfg.ExtraArgs...)
	cmd := exec.Command(cfg.Binary, args...)
	// Own process group: a terminal's Ctrl-C reaches ffrun, which stops the
	// child in order. Parent-death signal: the child never outlives ffrun.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// The child inherits the data directory's lock: should ffrun die first,
	// the directory stays locked until the child has flushed and exited.
	cmd.ExtraFiles = []*os.File{lock}
	if err := cmd.Start(); err != nil {
		removeTemp(tempDir)
		return nil, fmt.Errorf("devserver: start %s: %w", cfg.Binary, err)
	}
	s := &Server{
		Socket: socket, Binary: cfg.Binary, Dir: dir, LogFile: logFile,
		cmd: cmd, exited: make(chan struct{}), cfg: cfg, lock: lock, tempDir: tempDir,
	}
	if port != 0 {
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	if err := s.wait(ctx, port); err != nil {
		s.stopChild(context.Background())
		removeTemp(tempDir)
		return nil, err
	}
	attrs := append([]any{slog.String("binary", cfg.Binary)}, s.listens()...)
	cfg.Logger.Info("dev valkey started", append(attrs, slog.String("dir", dir), slog.Int("pid", cmd.Process.Pid), slog.String("cli", s.CLI()))...)
	return s, nil
}

// listens returns the log attributes of where the child listens: its
// socket and its TCP address, each only when it has one.
func (s *Server) listens() []any {
	var attrs []any
	if s.Socket != "" {
		attrs = append(attrs, slog.String("socket", s.Socket))
	}
	if s.Addr != "" {
		attrs = append(attrs, slog.String("addr", s.Addr))
	}
	return attrs
}

// socketPath returns the path of the child's socket: in dir, or when that
// path is too long for a socket "" (the child is reached over TCP), but
// with socketOnly a path in a new private temporary directory, returned
// too.
func socketPath(dir string, socketOnly bool) (socket, tempDir string, err error) {
	socket = filepath.Join(dir, "valkey.sock")
	if len(socket) <= socketPathMax {
		return socket, "", nil
	}
	if !socketOnly {
		return "", "", nil
	}
	tempDir, err = os.MkdirTemp("", "ffrun-") // mode 700
	if err != nil {
		return "", "", fmt.Errorf("devserver: the socket path in %s is too long; a temporary directory for it: %w", dir, err)
	}
	socket = filepath.Join(tempDir, "valkey.sock")
	if len(socket) > socketPathMax {
		removeTemp(tempDir)
		return "", "", fmt.Errorf("devserver: the socket path is too long both in the data dir %s and in the temporary directory %s (at most %d bytes); pick a shorter --data dir or TMPDIR",
			dir, tempDir, socketPathMax)
	}
	return socket, tempDir, nil
}

func removeTemp(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// wait waits until the child answers PING, and is the child: the server
// that answers on its port may be another one that took the port between
// freePort and the child's bind (or Config.Port be another's), and the
// child then exits. While the child loads its data it answers LOADING,
// and is waited for as long as each look finds more loaded than the last
// one, up to Config.LoadTimeout; it fails when the child goes
// Config.StartTimeout without progress (not answering, or loading no
// more), exits, or ctx ends.
func (s *Server) wait(ctx context.Context, port int) error {
	cfg := s.cfg
	network, addr := "unix", s.Socket
	if port != 0 {
		network, addr = "tcp", s.Addr
	}
	stall := time.NewTimer(cfg.StartTimeout)
	defer stall.Stop()
	var bound <-chan time.Time
	if cfg.LoadTimeout > 0 {
		t := time.NewTimer(cfg.LoadTimeout)
		defer t.Stop()
		bound = t.C
	}
	start := time.Now()
	loaded := int64(-1) // bytes loaded at the last progress seen; -1: not loading
	var lastLog time.Time
	var last error // why the last look did not find the child started
	for {
		st, err := probe(network, addr)
		switch {
		case err != nil:
			last = err
		case st.pid != s.cmd.Process.Pid:
			where := "port " + strconv.Itoa(port)
			if port == 0 {
				where = "socket " + addr
			}
			return portLost{fmt.Errorf("devserver: %s is taken by another server (pid %d)", where, st.pid)}
		case !st.loading:
			return nil
		default:
			last = fmt.Errorf("loading its data: %d of %d bytes", st.loadedBytes, st.totalBytes)
			if st.loadedBytes > loaded {
				loaded = st.loadedBytes
				stall.Reset(cfg.StartTimeout)
			}
			if time.Since(lastLog) >= loadLogEvery {
				lastLog = time.Now()
				cfg.Logger.Info("dev valkey loading its data", slog.Int64("loaded_bytes", st.loadedBytes),
					slog.Int64("total_bytes", st.totalBytes), slog.Float64("percent", st.percent),
					slog.Duration("waited", time.Since(start).Round(time.Millisecond)), slog.Int("pid", s.cmd.Process.Pid))
			}
		}
		select {
		case <-s.exited:
			// Maybe it could not bind the port: another process took it.
			return portLost{fmt.Errorf("devserver: %s exited at start (%v): %s", cfg.Binary, s.waitErr, tail(s.LogFile))}
		case <-stall.C:
			if loaded >= 0 {
				return fmt.Errorf("devserver: %s stopped making progress loading its data (%d bytes loaded, no more in %s; last look: %v): %s",
					cfg.Binary, loaded, cfg.StartTimeout, last, tail(s.LogFile))
			}
			return fmt.Errorf("devserver: %s did not answer PING on %s within %s (%v): %s", cfg.Binary, addr, cfg.StartTimeout, last, tail(s.LogFile))
		case <-bound:
			return fmt.Errorf("devserver: %s did not finish loading its data within %s (%v): %s", cfg.Binary, cfg.LoadTimeout, last, tail(s.LogFile))
		case <-ctx.Done():
			return fmt.Errorf("devserver: start: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ClientAddr is the address a co-located client connects to: the Unix
// socket as "unix:PATH" when there is one (no TCP stack between ffrun and
// its child: about a tenth less Valkey CPU per task in the backlog
// benchmark), else Addr.
func (s *Server) ClientAddr() string {
	if s.Socket != "" {
		return "unix:" + s.Socket
	}
	return s.Addr
}

// Exited is closed when the child has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// CLI is the command that opens valkey-cli (redis-cli for a redis-server)
// on the child, for a person to look at its data: over the socket when it
// has one.
func (s *Server) CLI() string {
	cli := "redis-cli"
	if strings.HasPrefix(filepath.Base(s.Binary), "valkey") {
		cli = "valkey-cli"
	}
	if s.Socket != "" {
		return cli + " -s " + shellQuote(s.Socket)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	return cli + " -p " + port
}

// shellQuote quotes s for a POSIX shell when it holds more than letters,
// digits and -_./:@%+,=.
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+,=", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Stop asks the child to shut down (SIGTERM: it flushes its append-only
// file), waits up to StopTimeout or ctx, then kills it (the error says
// which ended the wait), and releases the data directory's lock (and
// removes the socket's temporary directory). Safe to call twice.
func (s *Server) Stop(ctx context.Context) error {
	s.stopChild(ctx)
	s.unlock.Do(func() {
		s.lock.Close()
		removeTemp(s.tempDir)
	})
	return s.stopErr
}

// stopChild stops the child, once; the caller owns the lock.
func (s *Server) stopChild(ctx context.Context) {
	s.stop.Do(func() {
		select {
		case <-s.exited:
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(s.cfg.StopTimeout)
		defer t.Stop()
		select {
		case <-s.exited:
			s.cfg.Logger.Info("dev valkey stopped", s.listens()...)
			return
		case <-t.C:
			s.stopErr = fmt.Errorf("devserver: %s did not stop within %s; killed", s.Binary, s.cfg.StopTimeout)
		case <-ctx.Done():
			s.stopErr = fmt.Errorf("devserver: %s killed: the stop's context ended before it stopped: %w", s.Binary, ctx.Err())
		}
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// portLost marks the error of a start that may have failed because
// another process took the free port first: Start tries another.
type portLost struct{ error }

func (e portLost) Unwrap() error { return e.error }

// status is what a look at a starting server found.
type status struct {
	pid                     int  // INFO server process_id
	loading                 bool // PING answered LOADING
	loadedBytes, totalBytes int64
	percent                 float64
}

// probe looks at the server at addr over raw RESP (no client library
// needed): PING must answer +PONG, or -LOADING while the server loads its
// data (then INFO persistence tells how far it got), and INFO server gives
// its process_id. A server that answers otherwise is an error.
func probe(network, addr string) (status, error) {
	conn, err := net.DialTimeout(network, addr, 200*time.Millisecond)
	if err != nil {
		return status{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\nINFO server\r\nINFO persistence\r\n")); err != nil {
		return status{}, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return status{}, err
	}
	var st status
	switch {
	case strings.HasPrefix(line, "+PONG"):
	case strings.HasPrefix(line, "-LOADING"):
		st.loading = true
	default:
		return status{}, fmt.Errorf("unexpected reply to PING %q", strings.TrimSpace(line))
	}
	server, err := bulk(r, "INFO server")
	if err != nil {
		return status{}, err
	}
	persistence, err := bulk(r, "INFO persistence")
	if err != nil {
		return status{}, err
	}
	fields := map[string]string{}
	for l := range strings.Lines(server + persistence) {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			fields[k] = v
		}
	}
	if st.pid, err = strconv.Atoi(fields["process_id"]); err != nil {
		return status{}, errors.New("no process_id in the reply to INFO server")
	}
	if st.loading {
		// Absent or malformed (a server that does not report them), they
		// stay 0: no progress seen, the start times out.
		st.loadedBytes, _ = strconv.ParseInt(fields["loading_loaded_bytes"], 10, 64)
		st.totalBytes, _ = strconv.ParseInt(fields["loading_total_bytes"], 10, 64)
		st.percent, _ = strconv.ParseFloat(strings.TrimSuffix(fields["loading_loaded_perc"], "%"), 64)
	}
	return st, nil
}

// bulk reads a bulk string reply to cmd.
func bulk(r *bufio.Reader, cmd string) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return "", fmt.Errorf("unexpected reply to %s %q", cmd, strings.TrimSpace(line))
	}
	b := make([]byte, n+2) // and CRLF
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devserver: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}
