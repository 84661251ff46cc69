package installer

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/controller/ctlconf"
)

// noAllowanceLine is the operator's refusal of a foreground oracle_call
// when the installed config names no foreground allowance.
func noAllowanceLine(config string) string {
	return "steward-installer controller-tool: refused: " + config + ": " + ctlconf.ErrNoForegroundAllowance.Error() + "\n"
}

// TestControllerToolNeedsAnAllowance: with an installed config naming no
// foreground allowance, controller-tool refuses an oracle_call (exit 2,
// the exact line) and dials nothing; a discovery is sent; once root's
// config names an allowance, the oracle_call is sent too (the controller
// then judges it against the allowance).
func TestControllerToolNeedsAnAllowance(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.cfg.Sockets.Foreground = f.env.Controller.Foreground
	f.cfg.Payer = &controller.Payer{MaxPerCall: 100, PerDay: 100_000}
	f.install(t, f.configBytes(t))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.cfg.Sockets.Foreground, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	call := writeOperatorFile(t, "call.json", []byte(`{"tool":"oracle_call","arguments":{"application":"appliance","requestId":"r1","conversationId":"c","operationId":"text.sha256","arguments":{"text":"x"}}}`))
	discover := writeOperatorFile(t, "discover.json", []byte(`{"tool":"oracle_discover","arguments":{"application":"appliance"}}`))

	code, out, errs := run(t, f.env, "controller-tool", call)
	if code != ExitRefused || out != "" || errs != noAllowanceLine(f.config) {
		t.Fatalf("oracle_call without an allowance: exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, noAllowanceLine(f.config))
	}
	if dialled(t, ln) {
		t.Fatal("the refused oracle_call dialled the controller")
	}
	if !sent(t, f.env, ln, discover) {
		t.Fatal("a discovery without an allowance was not sent")
	}
	f.cfg.Payer.ForegroundAllowance = &ctlconf.PayerLimits{MaxPerCall: 5, PerDay: 10}
	f.install(t, f.configBytes(t))
	if !sent(t, f.env, ln, call) {
		t.Fatal("an oracle_call with an allowance was not sent")
	}
}

// dialled reports whether a connection waits on ln.
func dialled(t *testing.T, ln *net.UnixListener) bool {
	t.Helper()
	if err := ln.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err == nil {
		c.Close()
		return true
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	return false
}

// sent runs controller-tool with request and reports whether it dialled
// ln; the connection is closed unanswered, so the verb fails.
func sent(t *testing.T, env Env, ln *net.UnixListener, request string) bool {
	t.Helper()
	if err := ln.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan bool, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err == nil
	}()
	run(t, env, "controller-tool", request)
	return <-accepted
}
