package host_test

import (
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/wire/msg"
)

// TestJournalFailureExitsNonZero: `steward-operator serve` whose journal
// fails an fdatasync (the journal-fdatasync failpoint, armed in the child
// process) answers the call uncertain (its reservation may be on disk),
// delivers nothing, and exits 1 with one last line saying the journal
// stopped. After the restart the reservation is held once, and the attempt
// is never delivered.
func TestJournalFailureExitsNonZero(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
	c := hosttest.StartChild(t, w.Store, failpoint.JournalFdatasync)
	cl := w.Dial(t)
	res, lost := callOrLost(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
	if !lost && (res.Outcome != msg.StateUncertain || !strings.HasPrefix(res.Detail, "the host journal failed while recording the reservation: nothing was sent")) {
		t.Fatalf("call on a failed journal: %+v", res)
	}
	ws := c.WaitExit(t)
	lines := strings.Split(strings.TrimSpace(c.Stderr.String()), "\n")
	last := lines[len(lines)-1]
	if ws.ExitStatus() != cli.ExitFailure || !strings.HasPrefix(last, "steward-operator serve: host journal stopped for good (journal: stopped for good until it is reopened: ") ||
		!strings.Contains(last, "injected by STEWARD_FAILPOINT=journal-fdatasync") ||
		!strings.HasSuffix(last, "exiting so that a restart reopens it from disk") {
		t.Fatalf("host after its journal failed: exit %v, last line %q; want exit 1 saying the journal stopped", ws, last)
	}
	if got := w.App.Calls.Load(); got != 0 {
		t.Fatalf("the application saw %d requests, want none", got)
	}
	c = hosttest.StartChild(t, w.Store, "")
	cl = w.Dial(t)
	if in := peertest.Inspect(t, cl, "a1"); in.State != msg.StateUncertain {
		t.Fatalf("a1 after the restart: %s, want uncertain (the reservation reached the page cache)", in.State)
	}
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeDuplicate, "never delivered twice")
	c.Stop(t)
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Charged != 5 {
			t.Fatalf("purse %+v, want a1's reservation held once", p)
		}
	})
	if got := w.App.Calls.Load(); got != 0 {
		t.Fatalf("the application saw %d requests, want none", got)
	}
}
