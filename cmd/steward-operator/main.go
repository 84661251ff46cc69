// Command steward-operator is the operator's side of steward: the store of
// authority (controllers, purses, grants, routes) and the host daemon.
// See package operator/cli, whose CLI runs the commands;
// `steward-operator --help` lists them.
package main

import (
	"os"

	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/systemd"
)

func main() {
	c := &cli.CLI{Stdout: os.Stdout, Stderr: os.Stderr,
		Ready: systemd.Ready, Watchdog: systemd.StartWatchdog, Stopping: systemd.Stopping}
	os.Exit(c.Main(os.Args[1:]))
}
