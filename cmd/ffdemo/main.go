// Command ffdemo runs the example flows end to end on a fresh machine
// (`make demo`): an in-process `ffrun dev --flows examples/flows` with its
// own Valkey/Redis child, the example workers, a media pipeline run and a
// nightly ETL run with an injected failure, with every state change
// printed. See examples/demo.
package main

import (
	"os"

	"github.com/flowfabric/ff/examples/demo"
)

func main() { os.Exit(demo.Main(os.Args[1:], os.Stdout, os.Stderr)) }
