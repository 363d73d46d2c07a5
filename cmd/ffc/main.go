// Command ffc checks .ff workflow files, prints their compiled plan or
// graph, and generates typed Go code from them. See spec/language.md.
package main

import (
	"os"
	"runtime/debug"
	_ "time/tzdata" // a schedule's zone is checked as ffrun, which carries the zone data, loads it

	"github.com/flowfabric/ff/internal/ffc"
)

func main() {
	// ffc is a short-lived process that allocates heavily while parsing:
	// trading memory for less garbage collection makes large inputs about
	// a third faster. GOGC still overrides this.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(ffc.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
