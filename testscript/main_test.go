package testscript_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stewardrt/steward/appliance"
	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/installer"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/systemd"
)

// commands is every steward command a journey may run, each doing exactly
// what its cmd main does (the mains only hand their arguments, streams and
// package systemd's hooks to their package), and the dial helper of
// dial-as.
func commands() map[string]func() {
	return map[string]func(){
		"steward-operator": func() {
			c := &cli.CLI{Stdout: os.Stdout, Stderr: os.Stderr,
				Ready: systemd.Ready, Watchdog: systemd.StartWatchdog, Stopping: systemd.Stopping}
			os.Exit(c.Main(os.Args[1:]))
		},
		"steward-controller": func() {
			cli := &controller.CLI{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
				Listeners: systemd.Listeners, Ready: systemd.Ready, Watchdog: systemd.StartWatchdog, Stopping: systemd.Stopping}
			os.Exit(cli.Main(os.Args[1:]))
		},
		"steward-installer": func() {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			code := installer.Run(ctx, os.Args[1:], installer.EnvFromOS(), os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		},
		"steward-appliance": func() { os.Exit(appliance.Main(os.Args[1:], os.Stdout, os.Stderr)) },
		"steward-dev":       func() { os.Exit(dev.Main(os.Args[1:], os.Stdout, os.Stderr)) },
		dialHelperName: func() {
			if len(os.Args) != 2 {
				fmt.Fprintln(os.Stderr, "usage: "+dialHelperName+" SOCKET")
				os.Exit(2)
			}
			os.Exit(dialHelper(os.Args[1]))
		},
	}
}

// binDir is the directory on PATH that holds the commands.
var binDir string

// TestMain registers every steward command with testscript.Main, which
// copies this test binary into a directory on PATH under each command's
// name; a journey's `exec steward-controller ...` then starts that copy as
// a separate process, which runs the command instead of the tests. The
// journeys thus run the real commands as real processes, built with this
// test binary's flags: under `go test -race` every daemon runs with the
// race detector too.
//
// Measured on two cores, `go test -race -count=1 ./testscript`: 20 s in all
// (the slowest journey, accounts, 8 s; dev 5.5, restart 6.4, uncertain 4.5,
// call 4.5, bounds 3.2, appliance 0.2), against 14 s with the commands built
// by `go build` without -race. Before the journal found a segment's end
// block-wise the race-enabled daemons were about 25 times slower; what
// remained was the race runtime's 1 s sleep at every exit, which Run turns
// off.
func TestMain(m *testing.M) {
	testscript.Main(journeys{m}, commands())
}

// journeys is what testscript.Main runs once the commands are on PATH.
type journeys struct{ m *testing.M }

// Run finds the commands' directory and lets every account reach it: the
// accounts journey runs the commands as other accounts, and testscript
// makes the directory inside a 0700 temporary directory.
func (j journeys) Run() int {
	binDir = strings.Split(os.Getenv("PATH"), string(os.PathListSeparator))[0]
	if _, err := os.Stat(filepath.Join(binDir, dialHelperName)); err != nil {
		fmt.Fprintln(os.Stderr, "testscript: the commands are not first on PATH:", err)
		return 2
	}
	for _, d := range []string{filepath.Dir(binDir), binDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "testscript:", err)
			return 2
		}
	}
	// A race-enabled program sleeps 1 s before it exits (GORACE
	// atexit_sleep_ms, default 1000), to let late reports print; the
	// journeys run hundreds of short commands. testscript passes GORACE on.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	return j.m.Run()
}
