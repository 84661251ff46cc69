// Command steward-installer runs as root, directly or for the operator
// through sudo, and does only the fixed verbs of package installer's table
// (its usage lists them; the verb table says which the operator's sudoers
// drop-in allows); anything else is refused.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stewardrt/steward/installer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := installer.Run(ctx, os.Args[1:], installer.EnvFromOS(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
