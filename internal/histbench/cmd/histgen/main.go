// Command histgen is package histbench's generator and measurement:
//
//	histgen generate --dir GEN --bin BIN [--points 0,100000] [--clients 32] [--day-calls 50000]
//	histgen measure --dir GEN --bin BIN [--points ...] [--starts 3] [--idle 2s] [--json FILE]
//	histgen daemon host|controller ...   (the generator's own children)
//
// BIN holds steward-operator, steward-controller, steward-appliance and
// steward-dev (go build -o BIN/ ./cmd/...). See package histbench and
// docs/HISTORY.md.
package main

import (
	"os"

	"github.com/stewardrt/steward/internal/histbench"
)

func main() {
	os.Exit(histbench.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
