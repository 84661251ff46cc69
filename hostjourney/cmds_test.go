package hostjourney_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stewardrt/steward/internal/nspawn"
)

// commandLimit bounds one command inside the container; waitLimit one
// wait for a socket or a process.
const (
	commandLimit = 2 * time.Minute
	waitLimit    = time.Minute
)

// journey is the state the script's commands share: the container, and
// what the report collects.
type journey struct {
	c        *nspawn.Container
	exposure map[string]string
}

func (j *journey) commands() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"ct":       j.cmdCt,
		"capture":  cmdCapture,
		"waitsock": j.cmdWaitsock,
		"waitexit": j.cmdWaitexit,
		"reboot":   j.cmdReboot,
		"exposure": j.cmdExposure,
	}
}

// cmdCt implements `[!] ct [-u USER] [-stdin FILE] CMD ARGS...`: CMD runs
// inside the container as USER (root when absent) with the script's FILE
// as its standard input; its output is the command's stdout and stderr.
// Negated, it must exit non-zero.
func (j *journey) cmdCt(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("ct", flag.ContinueOnError)
	user := fs.String("u", "", "the account to run as")
	stdin := fs.String("stdin", "", "a file of the script for standard input")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		ts.Fatalf("usage: ct [-u USER] [-stdin FILE] CMD ARGS...")
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandLimit)
	defer cancel()
	cmd, err := j.c.Command(ctx, *user, fs.Args()...)
	ts.Check(err)
	if *stdin != "" {
		f, err := os.Open(ts.MkAbs(*stdin))
		ts.Check(err)
		defer f.Close()
		cmd.Stdin = f
	}
	cmd.Stdout, cmd.Stderr = ts.Stdout(), ts.Stderr()
	err = cmd.Run()
	if ctx.Err() != nil {
		ts.Fatalf("ct %s: not done within %v", fs.Arg(0), commandLimit)
	}
	switch {
	case err != nil && !neg:
		ts.Fatalf("ct %s: %v", fs.Arg(0), err)
	case err == nil && neg:
		ts.Fatalf("ct %s: unexpected success", fs.Arg(0))
	}
}

// cmdCapture implements `capture VAR [REGEXP]`: VAR is set from the last
// command's stdout: its one line, or REGEXP's first group in it.
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: capture VAR [REGEXP]")
	}
	out := ts.ReadFile("stdout")
	var v string
	if len(args) == 1 {
		v = strings.TrimSpace(out)
		if v == "" || strings.Contains(v, "\n") {
			ts.Fatalf("capture %s: the last stdout is not one line: %q", args[0], out)
		}
	} else {
		re, err := regexp.Compile(args[1])
		ts.Check(err)
		m := re.FindStringSubmatch(out)
		if len(m) != 2 {
			ts.Fatalf("capture %s: %q (with one group) does not match the last stdout", args[0], args[1])
		}
		v = m[1]
	}
	ts.Setenv(args[0], v)
	ts.Logf("%s=%s", args[0], v)
}

// cmdWaitsock implements `waitsock PATH`: a bounded wait until PATH inside
// the container is a socket that accepts (its directory must exist).
func (j *journey) cmdWaitsock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitsock PATH")
	}
	ts.Check(j.c.WaitSocket(args[0], waitLimit))
}

// cmdWaitexit implements `waitexit PID`: a bounded wait until the process
// PID inside the container has exited.
func (j *journey) cmdWaitexit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitexit PID")
	}
	pid, err := strconv.Atoi(args[0])
	ts.Check(err)
	ts.Check(j.c.WaitExit(pid, waitLimit))
}

// cmdReboot implements `reboot`: the container reboots (systemctl reboot,
// nspawn exits 133 and boots it again on the same overlay); stdout is the
// state the boot reached.
func (j *journey) cmdReboot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: reboot")
	}
	state, err := j.c.Reboot()
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), state)
}

var exposureLine = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// cmdExposure implements `exposure NAME`: the last stdout is a `systemd-analyze
// security` of one unit; its overall exposure is kept for the report under
// NAME.
func (j *journey) cmdExposure(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: exposure NAME")
	}
	m := exposureLine.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil {
		ts.Fatalf("exposure: no overall exposure level in the last stdout")
	}
	j.exposure[args[0]] = m[2] + " " + m[3]
	ts.Logf("exposure of %s (%s): %s %s", m[1], args[0], m[2], m[3])
}
