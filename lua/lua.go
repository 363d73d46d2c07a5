// Package lua holds the FlowFabric Valkey Functions library: real .lua
// files, embedded in the binary and assembled into the one library that
// package store loads with FUNCTION LOAD REPLACE.
//
// The library's version is a hash of its source, so every change to a .lua
// file changes the version and makes running servers reload it.
package lua

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// LibraryName is the name of the Functions library.
const LibraryName = "flowfabric"

// files lists the library's files in load order: helpers first.
var files = []string{"lib.lua", "execution.lua", "worker.lua", "scanner.lua", "flow.lua", "admission.lua", "budget.lua", "quota.lua", "version.lua"}

//go:embed *.lua
var fsys embed.FS

var source, version = assemble()

func assemble() (string, string) {
	var body strings.Builder
	for _, name := range files {
		b, err := fsys.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("lua: embedded file %s: %v", name, err))
		}
		fmt.Fprintf(&body, "\n-- file: %s\n", name)
		body.Write(b)
	}
	sum := sha256.Sum256([]byte(body.String()))
	v := hex.EncodeToString(sum[:8])
	return fmt.Sprintf("#!lua name=%s\nlocal LIBRARY_VERSION = '%s'\n%s", LibraryName, v, body.String()), v
}

// Source returns the library source to pass to FUNCTION LOAD.
func Source() string { return source }

// Version returns the library version that ff_version reports.
func Version() string { return version }

// Files returns the names of the library's files in load order.
func Files() []string { return append([]string(nil), files...) }
