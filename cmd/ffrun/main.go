// Command ffrun serves the FlowFabric API, scheduler and scanners on
// Valkey. See spec/api.md; the logic lives in runtime/ffrun.
package main

import (
	"os"
	// Schedules name IANA time zones; the zone data travels in the binary
	// so that hosts without /usr/share/zoneinfo (distroless images) have it.
	_ "time/tzdata"

	"github.com/flowfabric/ff/runtime/ffrun"
)

func main() { os.Exit(ffrun.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
