// Command steward-controller is the controller: what agents talk to. It
// holds no authority of its own; see package controller, whose CLI runs
// the commands (`steward-controller --help` lists them):
//
//	steward-controller keys init --dir DIR
//	steward-controller serve --config FILE
//	steward-controller mcp --socket PATH
//	steward-controller attempts list --config FILE [--json]
//	steward-controller attempts inspect ID --config FILE
//	steward-controller attempts resolve ID --config FILE
//	steward-controller journal inspect --config FILE
package main

import (
	"os"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/systemd"
)

func main() {
	cli := &controller.CLI{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Listeners: systemd.Listeners, Ready: systemd.Ready, Watchdog: systemd.StartWatchdog, Stopping: systemd.Stopping}
	os.Exit(cli.Main(os.Args[1:]))
}
