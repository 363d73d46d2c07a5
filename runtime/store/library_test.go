package store

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// otherVersion is the library version of a "previous release": this
// library's source under another version, as a rolling upgrade meets it.
const otherVersion = "0123456789abcdef"

func loadOtherVersion(t *testing.T, c valkey.Client) {
	t.Helper()
	src := strings.ReplaceAll(lua.Source(), lua.Version(), otherVersion)
	if err := c.Do(context.Background(), c.B().FunctionLoad().FunctionCode(src).Build()).Error(); err != nil {
		t.Fatalf("load the other version: %v", err)
	}
}

// loadedLibraries returns the names of the FlowFabric libraries loaded.
func loadedLibraries(t *testing.T, c valkey.Client) []string {
	t.Helper()
	list, err := c.Do(context.Background(), c.B().FunctionList().Libraryname(lua.LibraryFamily+"*").Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lib := range list {
		m, err := lib.AsMap()
		if err != nil {
			t.Fatal(err)
		}
		name := m["library_name"]
		s, _ := name.ToString()
		names = append(names, s)
	}
	slices.Sort(names)
	return names
}

func serverMillis(t *testing.T, c valkey.Client) int64 {
	t.Helper()
	tm, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := strconv.ParseInt(tm[0], 10, 64)
	us, _ := strconv.ParseInt(tm[1], 10, 64)
	return s*1000 + us/1000
}

// TestLibraryVersionsSideBySide: a process of another release keeps its
// own library, and calls it, after this version is loaded; it is deleted
// only once nobody has recorded its use for LibraryIdleAfter.
func TestLibraryVersionsSideBySide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Start(t)) // dedicated: it lists and deletes libraries
	loadOtherVersion(t, c)
	s, err := Open(ctx, Config{Client: c, KeyPrefix: "lib:", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	both := []string{lua.LibraryFamily + otherVersion, lua.Library()}
	slices.Sort(both)
	if got := loadedLibraries(t, c); !slices.Equal(got, both) {
		t.Fatalf("libraries after Open = %v, want %v", got, both)
	}
	for _, v := range []string{otherVersion, lua.Version()} {
		got, err := c.Do(ctx, c.B().Fcall().Function("ff_version_"+v).Numkeys(0).Build()).ToString()
		if err != nil || got != v {
			t.Fatalf("ff_version_%s = %q, %v", v, got, err)
		}
	}
	if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "k"}); err != nil {
		t.Fatal(err)
	}

	// The old process records its use with its own function: kept.
	key := s.k.libraries()
	if err := c.Do(ctx, c.B().Fcall().Function("ff_library_use_"+otherVersion).Numkeys(1).Key(key).Arg("600000").Build()).Error(); err != nil {
		t.Fatalf("the other version's ff_library_use: %v", err)
	}
	if n, err := s.KeepLibrary(ctx); err != nil || n != 0 {
		t.Fatalf("KeepLibrary with the other version in use = %d, %v", n, err)
	}
	if got := loadedLibraries(t, c); !slices.Equal(got, both) {
		t.Fatalf("libraries after KeepLibrary = %v, want %v", got, both)
	}

	// Its last use one second short of LibraryIdleAfter: still kept.
	now := serverMillis(t, c)
	recent := strconv.FormatInt(now-LibraryIdleAfter.Milliseconds()+1000, 10)
	c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(otherVersion, recent).Build())
	if n, err := s.KeepLibrary(ctx); err != nil || n != 0 {
		t.Fatalf("KeepLibrary with the other version used 9m59s ago = %d, %v", n, err)
	}

	// Idle for longer: deleted, and forgotten. A field that is no version
	// is forgotten without a FUNCTION DELETE.
	idle := strconv.FormatInt(now-LibraryIdleAfter.Milliseconds()-1000, 10)
	c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(otherVersion, idle).FieldValue("not-a-version", idle).Build())
	if n, err := s.KeepLibrary(ctx); err != nil || n != 1 {
		t.Fatalf("KeepLibrary with the other version idle = %d, %v; want 1 deleted", n, err)
	}
	if got := loadedLibraries(t, c); !slices.Equal(got, []string{lua.Library()}) {
		t.Fatalf("libraries after the idle version's deletion = %v", got)
	}
	rec, err := c.Do(ctx, c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 {
		t.Fatalf("use records = %v, want only this version's", rec)
	}
	at, _ := strconv.ParseInt(rec[lua.Version()], 10, 64)
	if d := serverMillis(t, c) - at; d < 0 || d > 60_000 {
		t.Fatalf("this version's use recorded at %d, %d ms from the server's clock", at, d)
	}
	// This version works on.
	if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "k"}); err != nil {
		t.Fatal(err)
	}

	// An idle version whose library is already gone (deleted by hand, or
	// by another process meanwhile) is forgotten without an error.
	c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(otherVersion, idle).Build())
	if n, err := s.KeepLibrary(ctx); err != nil || n != 1 {
		t.Fatalf("KeepLibrary with an idle version already deleted = %d, %v", n, err)
	}
	if ok, _ := c.Do(ctx, c.B().Hexists().Key(key).Field(otherVersion).Build()).AsBool(); ok {
		t.Fatal("the deleted version is still recorded")
	}

	// Another key prefix (another deployment on the server) has its own
	// records: this one's idle versions are not its business.
	loadOtherVersion(t, c)
	c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(otherVersion, idle).Build())
	other, err := Open(ctx, Config{Client: c, KeyPrefix: "lib2:", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := other.KeepLibrary(ctx); err != nil || n != 0 {
		t.Fatalf("KeepLibrary of another prefix = %d, %v", n, err)
	}
	if got := loadedLibraries(t, c); !slices.Equal(got, both) {
		t.Fatalf("libraries after another prefix's KeepLibrary = %v, want %v", got, both)
	}
}

// TestLibraryDeletedUnderARunningProcess: a process whose library was
// deleted (it was stopped for longer than LibraryIdleAfter) loads it again
// at its next call and records its use again.
func TestLibraryDeletedUnderARunningProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Start(t)) // dedicated: it deletes libraries
	s, err := Open(ctx, Config{Client: c, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().FunctionDelete().LibraryName(lua.Library()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	c.Do(ctx, c.B().Del().Key(s.k.libraries()).Build())
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), lua.Library()+" not loaded") {
		t.Fatalf("Ready with the library deleted = %v", err)
	}
	if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "k"}); err != nil {
		t.Fatalf("CreateExecution after the library's deletion: %v", err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after the reload: %v", err)
	}
	if _, err := s.KeepLibrary(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Do(ctx, c.B().Hexists().Key(s.k.libraries()).Field(lua.Version()).Build()).AsBool(); !ok {
		t.Fatal("use not recorded again")
	}
}

// TestLibraryUseValidates: a bad idle time is refused before any write.
func TestLibraryUseValidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.s.k.libraries()
	before, err := e.c.Do(e.ctx, e.c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	e.c.Do(e.ctx, e.c.B().Del().Key(key).Build())
	for _, idle := range []string{"0", "-5", "x", "1.5", ""} {
		_, err := e.s.single(e.ctx, call{fn: "ff_library_use", keys: []string{key}, args: []string{idle}}, "", "record library use")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "idle") {
			t.Errorf("ff_library_use idle %q = %v, want a refusal naming idle", idle, err)
		}
	}
	after, err := e.c.Do(e.ctx, e.c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 0 {
		t.Fatalf("refused calls wrote %v", after)
	}
	if len(before) != 1 {
		t.Fatalf("Open recorded %v, want this version's use", before)
	}
	if diff := cmp.Diff([]string{lua.Version()}, mapsKeys(before)); diff != "" {
		t.Fatalf("Open's record (-want +got):\n%s", diff)
	}
}

func mapsKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
