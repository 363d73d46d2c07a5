// Package lua holds the FlowFabric Valkey Functions library: real .lua
// files, embedded in the binary and assembled into the one library that
// package store loads with FUNCTION LOAD.
//
// The library's version is a hash of its source, so every change to a .lua
// file changes the version. The version is part of the library's name and
// of every function's name (ff_claim is registered as ff_claim_<version>):
// Valkey function names are global to a server, and versioned names let
// processes of two releases share one Valkey during a rolling upgrade,
// each calling its own functions.
package lua

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// LibraryFamily starts the name of every version of the library:
// "flowfabric_<version>".
const LibraryFamily = "flowfabric_"

// files lists the library's files in load order: helpers first. Every
// file after the first is wrapped in a block (do ... end) of its own: Lua
// allows a function 200 local variables at once, the library's top level
// is one function, and the files' top-level locals together would pass
// that. The first file's locals are every file's; the others' are their
// own (what several use belongs in the first).
var files = []string{"lib.lua", "execution.lua", "worker.lua", "scanner.lua", "flow.lua", "admission.lua", "budget.lua", "quota.lua", "schedule.lua", "version.lua"}

//go:embed *.lua
var fsys embed.FS

var source, version = assemble()

// functions maps each function's base name to its registered name.
var functions = registered(source, version)

func assemble() (string, string) {
	var body strings.Builder
	for _, name := range files {
		b, err := fsys.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("lua: embedded file %s: %v", name, err))
		}
		fmt.Fprintf(&body, "\n-- file: %s\n", name)
		if name == files[0] {
			body.Write(b)
			continue
		}
		body.WriteString("do\n")
		body.Write(b)
		body.WriteString("\nend\n")
	}
	sum := sha256.Sum256([]byte(body.String()))
	v := hex.EncodeToString(sum[:8])
	return fmt.Sprintf("#!lua name=%s%s\nlocal LIBRARY_VERSION = '%s'\n%s", LibraryFamily, v, v, body.String()), v
}

// registerCall matches the registrations in the library's source.
var registerCall = regexp.MustCompile(`(?m)^register\('([a-z_]+)'`)

func registered(src, v string) map[string]string {
	m := make(map[string]string)
	for _, sub := range registerCall.FindAllStringSubmatch(src, -1) {
		m[sub[1]] = sub[1] + "_" + v
	}
	return m
}

// Function returns the name under which this version of the library
// registers the function base (ff_claim: "ff_claim_<version>"), for FCALL.
func Function(base string) string {
	if name, ok := functions[base]; ok {
		return name
	}
	return base + "_" + version
}

// Library returns the library's name: LibraryFamily and the version.
func Library() string { return LibraryFamily + version }

// Source returns the library source to pass to FUNCTION LOAD.
func Source() string { return source }

// Version returns the library version that ff_version reports.
func Version() string { return version }

// Files returns the names of the library's files in load order.
func Files() []string { return append([]string(nil), files...) }
