package ffc

import "flag"

var update = flag.Bool("update", false, "rewrite expected outputs in test scripts")
