// Command steward-operator is the operator's side of steward: the store of
// authority (controllers, purses, grants, routes) and the host daemon.
// See package operator; `steward-operator --help` lists the commands.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/systemd"
)

func main() {
	cli := &operator.CLI{Stdout: os.Stdout, Stderr: os.Stderr, Ready: func() {
		if err := systemd.Ready("STATUS=serving"); err != nil {
			slog.Warn("steward-operator: sd_notify READY=1", "err", err)
		}
		// The unit sets WatchdogSec=; without pings systemd kills the
		// host. The pings stop when the process exits.
		if _, err := systemd.StartWatchdog(context.Background(), nil); err != nil {
			slog.Warn("steward-operator: sd_notify watchdog", "err", err)
		}
	}}
	os.Exit(cli.Main(os.Args[1:]))
}
