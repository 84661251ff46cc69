package installer

import (
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// operatorSudoVerbs is every verb the operator's sudo reaches: none of them
// writes the controller's config, journal binding or host pin.
var operatorSudoVerbs = []string{
	"status", "bundle-install", "controller-tool", "controller-tool-result", "controller-tool-ack",
	"controller-journal", "controller-attempts", "controller-attempt-inspect", "controller-attempt-resolve",
}

// TestSudoersLeaveThePayerToRoot: the rendered drop-in lets the operator
// run exactly operatorSudoVerbs; controller-config, controller-enroll and
// controller-pin-host (the payer's config, the journal's rebind to it, and
// whom the controller trusts) are in no sudo column.
func TestSudoersLeaveThePayerToRoot(t *testing.T) {
	rule := string(renderSudoers("/opt/steward/bin"))
	var got []string
	for _, line := range strings.Split(rule, "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "/opt/steward/bin/steward-installer "); ok {
			if v := strings.TrimSuffix(strings.Fields(cmd)[0], ","); !slices.Contains(got, v) {
				got = append(got, v)
			}
		}
	}
	if !slices.Equal(got, operatorSudoVerbs) {
		t.Fatalf("the drop-in reaches %q, want %q:\n%s", got, operatorSudoVerbs, rule)
	}
	for _, root := range []string{"controller-config", "controller-enroll", "controller-pin-host", "install", "uninstall"} {
		if v, ok := lookupVerb(root); !ok || v.sudo != nil {
			t.Errorf("verb %s: found %v, sudo column %q", root, ok, v.sudo)
		}
	}
}

// TestEnrollRootOnly: controller-enroll refuses a non-root euid, as
// controller-config does, before it reads anything.
func TestEnrollRootOnly(t *testing.T) {
	s := newEnrollSetup(t)
	env := s.f.env
	env.EUID = 4242
	env.Controller.Account = "steward-controller"
	code, out, errs := run(t, env, "controller-enroll", enrollRequestFile(t, binding(t, s.a), binding(t, s.b)))
	if code != ExitFail || out != "" || errs != "steward-installer controller-enroll: must run as root (euid is 4242): this verb changes the payer's side, which the operator's sudo cannot reach\n" {
		t.Fatalf("as euid 4242: exit %d\n%s%s", code, out, errs)
	}
	if last, _ := s.journalState(t); last != 1 {
		t.Fatalf("a refused enrollment wrote: last seq %d", last)
	}
}

// TestForegroundDialsOnlyTheInstalledPath: a config that names another
// foreground socket (the controller's account writes the config) is
// refused by every verb that speaks on the socket, and the socket it names
// (a real listener) gets no connection.
func TestForegroundDialsOnlyTheInstalledPath(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	named := f.cfg.Sockets.Foreground
	if named == f.env.Controller.Foreground {
		t.Fatal("the fixture's config names the installed foreground path")
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: named, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tool := writeOperatorFile(t, "tool.json", []byte(`{"tool":"oracle_discover"}`))
	want := "the installed config " + f.config + " names the foreground socket \"" + named + "\", not the installed \"" +
		f.env.Controller.Foreground + "\": not dialled (install a config naming the installed layout: steward-installer controller-config)\n"
	for _, args := range [][]string{
		{"controller-tool", tool}, {"controller-tool-result", "a1"}, {"controller-tool-ack", "a1"},
		{"controller-attempts"}, {"controller-attempt-inspect", "a1"}, {"controller-attempt-resolve", "a1"},
	} {
		code, out, errs := run(t, f.env, args...)
		if code != ExitFail || out != "" || errs != "steward-installer "+args[0]+": "+want {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %q", args, code, out, errs)
		}
	}
	// Every verb has returned: a connection it made would be queued now.
	if err := ln.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err == nil {
		c.Close()
		t.Fatal("a verb dialled the socket the config names")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("accept: %v", err)
	}
}
