package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/valkey-io/valkey-go"
)

// Library versions.
//
// Every version of the Functions library is loaded under a name of its
// own (lua.Library) and registers versioned function names, so that
// processes of two releases can share a server during a rolling upgrade,
// each calling its own functions on the same keys. What stays behind is
// cleaned up by use: each process records that it uses its version
// (KeepLibrary, at Open and then every LibraryKeepInterval from the
// library scanner) in <prefix>ff:libraries, and the libraries of versions
// nobody recorded for LibraryIdleAfter are deleted from every primary. A
// process whose library was deleted meanwhile (stopped for that long, or
// another deployment on the same server with another key prefix) loads
// it again at its next call, as after a FUNCTION FLUSH.
const (
	// LibraryKeepInterval is how often a running process records the use
	// of its library version.
	LibraryKeepInterval = time.Minute
	// LibraryIdleAfter is how long a library version may go unrecorded
	// before it is deleted.
	LibraryIdleAfter = 10 * time.Minute
)

// ensureLibrary loads this version of the library where it is missing: on
// the server, or on every primary of a cluster. force (a call found the
// library missing) also loads it where reading the version fails.
func (s *Store) ensureLibrary(ctx context.Context, force bool) error {
	_, err := s.loadLibrary(ctx, force)
	return err
}

// reloadLibrary loads the library again after a call found it missing
// and, when this call is the one that loaded it, restores what Open
// stored (the partition counts: another process with other counts is
// refused again) and calls Config.LibraryReloaded.
func (s *Store) reloadLibrary(ctx context.Context) error {
	loaded, err := s.loadLibrary(ctx, true)
	if err != nil || !loaded {
		return err
	}
	if err := s.restorePartitions(ctx); err != nil {
		// Another process stored other counts in the moment since the
		// restart (both now place work on different partition sets), or
		// Valkey did not answer.
		s.log.ErrorContext(ctx, "after reloading the functions library", slog.Any("error", err))
	}
	if f := s.cfg.LibraryReloaded; f != nil {
		f()
	}
	return nil
}

// restorePartitions stores the partition counts again after the library
// was reloaded (checkPartitions), asking again with a backoff for about 3
// s while the call fails otherwise than with ErrPartitionMismatch: right
// after a restart, each of the client's pipelined connections fails the
// first command given to it (EOF) before it redials, and counts not
// stored would let a process with other counts open beside this one.
func (s *Store) restorePartitions(ctx context.Context) error {
	wait := 10 * time.Millisecond
	for try := 1; ; try++ {
		err := s.checkPartitions(ctx)
		if err == nil || errors.Is(err, ErrPartitionMismatch) || try == 9 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// loadLibrary is ensureLibrary, reporting whether it loaded the library on
// some node (another goroutine may have done so while this one waited).
func (s *Store) loadLibrary(ctx context.Context, force bool) (bool, error) {
	s.load.Lock()
	defer s.load.Unlock()
	nodes, err := s.libraryNodes(ctx)
	if err != nil {
		return false, err
	}
	loaded := false
	for _, n := range nodes {
		// Another goroutine may have loaded it while this one waited.
		v, err := n.c.Do(ctx, n.c.B().Fcall().Function(lua.Function("ff_version")).Numkeys(0).Build()).ToString()
		if err == nil && v == lua.Version() {
			continue
		}
		if !force && err != nil && !isFunctionNotFound(err) {
			return loaded, fmt.Errorf("store: read library version%s: %w", n.desc, err)
		}
		// REPLACE: a library of this name is this very source, so a
		// concurrent load by another process is no conflict.
		if err := n.c.Do(ctx, n.c.B().FunctionLoad().Replace().FunctionCode(lua.Source()).Build()).Error(); err != nil {
			return loaded, fmt.Errorf("store: FUNCTION LOAD%s: %w", n.desc, err)
		}
		loaded = true
		s.log.InfoContext(ctx, "functions library loaded", n.logArgs(attrLibrary, lua.Library())...)
	}
	return loaded, nil
}

// KeepLibrary records that this process uses its library version, and
// deletes from every primary the libraries of the other versions recorded
// in this key prefix that nobody has used for LibraryIdleAfter. It
// returns how many versions it deleted.
func (s *Store) KeepLibrary(ctx context.Context) (int, error) {
	items, err := s.single(ctx, call{fn: "ff_library_use", keys: []string{s.k.libraries()},
		args: []string{strconv.FormatInt(LibraryIdleAfter.Milliseconds(), 10)}}, "", "record library use")
	if err != nil {
		return 0, err
	}
	if len(items) == 0 {
		return 0, nil
	}
	nodes, err := s.libraryNodes(ctx)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, m := range items {
		v, err := m.ToString()
		if err != nil {
			return deleted, fmt.Errorf("store: ff_library_use: malformed version: %w", err)
		}
		gone, err := s.deleteLibrary(ctx, nodes, v)
		if err != nil {
			return deleted, err
		}
		if gone {
			deleted++
		}
	}
	return deleted, nil
}

// deleteLibrary deletes library version v from nodes, then its record,
// and reports whether v was a version. A field that cannot be one (written
// by hand) only loses its record.
func (s *Store) deleteLibrary(ctx context.Context, nodes []libraryNode, v string) (bool, error) {
	version := isLibraryVersion(v)
	if version {
		name := lua.LibraryFamily + v
		for _, n := range nodes {
			err := n.c.Do(ctx, n.c.B().FunctionDelete().LibraryName(name).Build()).Error()
			if err != nil && !isLibraryNotFound(err) {
				return false, fmt.Errorf("store: FUNCTION DELETE %s%s: %w", name, n.desc, err)
			}
		}
		s.log.InfoContext(ctx, "functions library of an idle version deleted", attrLibrary, name,
			attrIdleFor, ">"+LibraryIdleAfter.String())
	}
	if err := s.c.Do(ctx, s.c.B().Hdel().Key(s.k.libraries()).Field(v).Build()).Error(); err != nil {
		return false, fmt.Errorf("store: forget library version %q: %w", v, err)
	}
	return version, nil
}

// isLibraryVersion reports whether v has the form of lua.Version.
func isLibraryVersion(v string) bool {
	if len(v) != len(lua.Version()) {
		return false
	}
	for _, c := range v {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isLibraryNotFound(err error) bool {
	var ve *valkey.ValkeyError
	return errors.As(err, &ve) && strings.Contains(strings.ToLower(ve.Error()), "library not found")
}

// libraryNode is a server that must hold the library.
type libraryNode struct {
	c    valkey.Client
	addr string // "" on a plain server
	desc string // " on <addr>" for messages, "" on a plain server
}

// logArgs are args and the node's address when it is a cluster node.
func (n libraryNode) logArgs(args ...any) []any {
	if n.addr != "" {
		args = append(args, attrNode, n.addr)
	}
	return args
}

// libraryNodes returns where the library must be loaded: the server, or
// each primary of a cluster. A keyless command such as FUNCTION LOAD goes
// to one node of a cluster, and functions are not shared between shards
// (a replica gets them from its primary).
func (s *Store) libraryNodes(ctx context.Context) ([]libraryNode, error) {
	return s.primaries(ctx, false)
}

// primaries returns the primaries of a cluster (the one server
// otherwise). A node that does not answer ROLE is skipped, unless strict:
// then it is an error (a pass that must see every key cannot tell whether
// it was a primary).
func (s *Store) primaries(ctx context.Context, strict bool) ([]libraryNode, error) {
	if s.c.Mode() != valkey.ClientModeCluster {
		return []libraryNode{{c: s.c}}, nil
	}
	var out []libraryNode
	var unreachable []error
	for addr, c := range s.c.Nodes() {
		role, err := c.Do(ctx, c.B().Role().Build()).ToArray()
		if err != nil || len(role) == 0 {
			// A node that does not answer is skipped: a replica that went
			// away must not make every ffrun unready, and a primary that
			// went away cannot be loaded anyway (the calls to its slots
			// fail until the cluster fails over to a replica, which has
			// the library from it).
			unreachable = append(unreachable, fmt.Errorf("ROLE of cluster node %s: %w", addr, err))
			continue
		}
		if r, _ := role[0].ToString(); r == "master" || r == "primary" {
			out = append(out, libraryNode{c: c, addr: addr, desc: " on " + addr})
		}
	}
	if len(unreachable) > 0 && strict {
		return nil, errors.Join(append([]error{errors.New("store: a cluster node does not answer")}, unreachable...)...)
	}
	if len(unreachable) > 0 {
		s.log.DebugContext(ctx, "cluster nodes skipped for the library", attrError, errors.Join(unreachable...))
	}
	if len(out) == 0 {
		return nil, errors.Join(append([]error{errors.New("store: no primary of the cluster answers")}, unreachable...)...)
	}
	return out, nil
}

// Ready reports whether the server answers, has this version of the
// library loaded and takes writes (on every primary of a cluster), for
// readiness probes: a server at maxmemory without eviction answers reads
// and refuses every state change. It does not load the library: the next
// FCALL does.
func (s *Store) Ready(ctx context.Context) error {
	nodes, err := s.libraryNodes(ctx)
	if err != nil {
		return fmt.Errorf("store: not ready: %w", err)
	}
	for _, n := range nodes {
		v, err := n.c.Do(ctx, n.c.B().Fcall().Function(lua.Function("ff_version")).Numkeys(0).Build()).ToString()
		if isFunctionNotFound(err) {
			return fmt.Errorf("store: not ready: functions library %s not loaded%s", lua.Library(), n.desc)
		}
		if err != nil {
			return fmt.Errorf("store: not ready%s: %w", n.desc, err)
		}
		if v != lua.Version() {
			return fmt.Errorf("store: not ready: library %s answers version %q%s", lua.Library(), v, n.desc)
		}
		if err := n.c.Do(ctx, n.c.B().Fcall().Function(lua.Function("ff_writable")).Numkeys(0).Build()).Error(); err != nil {
			return fmt.Errorf("store: not ready: the server refuses writes%s: %w", n.desc, err)
		}
	}
	return nil
}
