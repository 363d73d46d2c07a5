// Package devserver runs a private valkey-server (or redis-server) child
// process for `ffrun dev`: found on PATH, started on a free local port and
// a Unix socket in its data directory, with append-only persistence,
// stopped with its parent.
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
	StartTimeoutDefault = 10 * time.Second
	StopTimeoutDefault  = 10 * time.Second
)

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
	Binary       string // server program; default FindBinary()
	Dir          string // data directory (created); required
	Port         int    // 0 = a free port
	StartTimeout time.Duration
	StopTimeout  time.Duration
	Logger       *slog.Logger
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
	Addr string // 127.0.0.1:port
	// Socket is the path of the child's Unix socket, in the data directory;
	// "" when that path is too long for a socket.
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
}

// Start launches the child and waits until it answers PING. A port
// another server holds (Config.Port, or a free port taken before the child
// bound it) is found by that server's process id: an error for
// Config.Port, another free port otherwise.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("devserver: Config.Dir is required")
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
		if cfg.Port != 0 || ctx.Err() != nil {
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
	socket := filepath.Join(dir, "valkey.sock")
	if len(socket) > socketPathMax {
		socket = ""
	} else {
		args = append(args, "--unixsocket", socket, "--unixsocketperm", "700")
	}
	if cfg.NoPersistence {
		args = append(args, "--appendonly", "no", "--save", "")
	} else {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	args = append(args, cfg.ExtraArgs...)
	cmd := exec.Command(cfg.Binary, args...)
	// Own process group: a terminal's Ctrl-C reaches ffrun, which stops the
	// child in order. Parent-death signal: the child never outlives ffrun.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// The child inherits the data directory's lock: should ffrun die first,
	// the directory stays locked until the child has flushed and exited.
	cmd.ExtraFiles = []*os.File{lock}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start %s: %w", cfg.Binary, err)
	}
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Socket: socket, Binary: cfg.Binary, Dir: dir, LogFile: logFile,
		cmd: cmd, exited: make(chan struct{}), cfg: cfg, lock: lock,
	}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	deadline := time.NewTimer(cfg.StartTimeout)
	defer deadline.Stop()
	for {
		// The server that answers must be the child: the port may have
		// been taken by another one between freePort and the child's bind
		// (or Config.Port be another's), and the child then exits.
		if pid, err := serverPID(s.Addr); err == nil {
			if pid != cmd.Process.Pid {
				s.stopChild(context.Background())
				return nil, fmt.Errorf("devserver: port %d is taken by another server (pid %d)", port, pid)
			}
			cfg.Logger.Info("dev valkey started", slog.String("binary", cfg.Binary), slog.String("addr", s.Addr),
				slog.String("socket", socket), slog.String("dir", dir), slog.Int("pid", cmd.Process.Pid))
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("devserver: %s exited at start (%v): %s", cfg.Binary, s.waitErr, tail(logFile))
		case <-deadline.C:
			s.stopChild(context.Background())
			return nil, fmt.Errorf("devserver: %s did not answer PING on %s within %s: %s", cfg.Binary, s.Addr, cfg.StartTimeout, tail(logFile))
		case <-ctx.Done():
			s.stopChild(context.Background())
			return nil, fmt.Errorf("devserver: start: %w", ctx.Err())
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

// Stop asks the child to shut down (SIGTERM: it flushes its append-only
// file), waits up to StopTimeout or ctx, then kills it, and releases the
// data directory's lock. Safe to call twice.
func (s *Server) Stop(ctx context.Context) error {
	s.stopChild(ctx)
	s.unlock.Do(func() { s.lock.Close() })
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
			s.cfg.Logger.Info("dev valkey stopped", slog.String("addr", s.Addr))
			return
		case <-t.C:
		case <-ctx.Done():
		}
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.stopErr = fmt.Errorf("devserver: %s did not stop within %s; killed", s.Binary, s.cfg.StopTimeout)
	})
}

// serverPID asks the server at addr for its process id, over raw RESP (no
// client library needed): PING must answer +PONG (not -LOADING: a server
// still loading its append-only file is not started yet), then INFO server
// gives process_id. A server that answers otherwise is an error.
func serverPID(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return 0, fmt.Errorf("unexpected reply to PING %q", strings.TrimSpace(line))
	}
	if line, err = r.ReadString('\n'); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return 0, fmt.Errorf("unexpected reply to INFO %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, err
	}
	for l := range strings.Lines(string(info)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id in the reply to INFO server")
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
