package host_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// lostAnswer stands for the answer of a call during which the host exited.
const lostAnswer = "(lost as the host exited)"

// TestFullDiskWhileServing: the host store is on a small tmpfs, filled
// while the host serves calls. Calls go on until the host refuses one
// because its reservation could not be journaled (with preallocated
// segments that is when the next segment cannot be made; when an outcome
// is the record that needs it, the host journal stops and the host exits
// 1, and the test restarts it). Then, after a restart with space freed:
// every refused attempt is not reserved, the purse is exactly what the
// definite and uncertain attempts charged (receipts verify: one receipt
// per definite attempt, one held charge per uncertain one), and a retry of
// every attempt with the same id is charged once: a refused one is
// delivered now, the others are duplicates.
func TestFullDiskWhileServing(t *testing.T) {
	const price, fund = 5, 100000
	disk := testenv.SmallTmpfs(t, 1<<20)
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: fund, Price: price, StoreIn: disk, SegmentSize: 16 << 10})
	c := hosttest.StartChild(t, w.Store, "")
	cl := w.Dial(t)
	state := map[string]msg.State{} // what each attempt was told
	var order []string
	n := 0
	next := func() (string, msg.DispatchResult) {
		n++
		id := fmt.Sprintf("f%d", n)
		order = append(order, id)
		res, lost := callOrLost(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", fmt.Sprintf(`{"expression":"%d+1"}`, n)))
		if lost {
			res = msg.DispatchResult{Attempt: id, Outcome: msg.StateUncertain, Detail: lostAnswer}
		}
		state[id] = res.Outcome
		return id, res
	}
	for range 10 {
		if _, res := next(); res.Outcome != msg.StateDefinite {
			t.Fatalf("call before the disk filled: %+v", res)
		}
	}
	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	refusals, exits := 0, 0
	for refusals < 3 {
		if n > 1000 {
			t.Fatal("a thousand calls on a full disk and no reservation refused")
		}
		id, res := next()
		switch {
		case res.Outcome == msg.StateDefinite:
		case res.Outcome == msg.StateRefused && res.Refusal.Code == msg.CodeJournal:
			if res.Refusal.Reason != "the host could not journal the reservation; nothing was sent or charged" {
				t.Fatalf("refusal of %s: %q", id, res.Refusal.Reason)
			}
			peertest.WantNoInternals(t, res.Refusal.Reason)
			refusals++
		case res.Outcome == msg.StateUncertain && (res.Detail == "the application answered but the host could not journal the outcome" || res.Detail == lostAnswer):
			// The receipt record needed the segment: the host stops.
			if ws := c.WaitExit(t); ws.ExitStatus() != cli.ExitFailure {
				t.Fatalf("host after a lost receipt: exit %v, want 1; stderr: %s", ws, c.Stderr.String())
			}
			exits++
			c = hosttest.StartChild(t, w.Store, "")
			cl = w.Dial(t)
		default:
			t.Fatalf("call %s on the full disk: %+v", id, res)
		}
	}
	c.Stop(t)
	filler.Close()
	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	count := map[msg.State]int{}
	for _, s := range state {
		count[s]++
	}
	t.Logf("%d calls: %d definite, %d refused (reservation not journaled), %d uncertain (receipt not journaled, host exited %d times)",
		n, count[msg.StateDefinite], count[msg.StateRefused], count[msg.StateUncertain], exits)
	held := uint64(price * (count[msg.StateDefinite] + count[msg.StateUncertain]))
	checkPurse := func(when string, charged uint64, receipts, findings int) {
		t.Helper()
		checkFullDiskPurse(t, w, fund, when, charged, receipts, findings)
	}
	checkPurse("after the full disk", held, count[msg.StateDefinite], count[msg.StateUncertain])

	c = hosttest.StartChild(t, w.Store, "")
	cl = w.Dial(t)
	for _, id := range order {
		in := peertest.Inspect(t, cl, id)
		want := state[id]
		if want == msg.StateRefused {
			want = msg.StateNotSeen
		}
		if in.State != want {
			t.Fatalf("%s was told %s; after the restart the host says %s (%s), want %s", id, state[id], in.State, in.Detail, want)
		}
	}
	for round := range 2 {
		for i, id := range order {
			res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", fmt.Sprintf(`{"expression":"%d+1"}`, i+1)))
			if state[id] == msg.StateRefused && round == 0 {
				if res.Outcome != msg.StateDefinite {
					t.Fatalf("retry of refused %s: %+v, want it delivered now", id, res)
				}
				continue
			}
			peertest.WantRefusal(t, res, msg.CodeDuplicate, "never delivered twice")
		}
	}
	c.Stop(t)
	checkPurse("after the retries", held+uint64(price*count[msg.StateRefused]), count[msg.StateDefinite]+count[msg.StateRefused], count[msg.StateUncertain])
}

// checkFullDiskPurse is TestFullDiskWhileServing's check of the stopped
// store when: the purse charged exactly charged of fund, and the receipts
// verify, receipts of them, with findings held charges and nothing else.
func checkFullDiskPurse(t *testing.T, w *hosttest.World, fund uint64, when string, charged uint64, receipts, findings int) {
	t.Helper()
	w.WithStore(t, func(s *operator.Store) {
		p, _ := s.PurseShow("ctl")
		if p.Charged != charged || p.Balance != fund-charged {
			t.Fatalf("%s: purse %+v, want charged %d", when, p, charged)
		}
		rep, err := audit.VerifyStore(w.Store)
		if rep.Receipts != receipts || len(rep.Findings) != findings || (findings == 0) != (err == nil) {
			t.Fatalf("%s: verify %+v, %v; want %d receipts and %d held charges", when, rep, err, receipts, findings)
		}
		for _, f := range rep.Findings {
			if !strings.Contains(f, "charged without a receipt, still held") {
				t.Fatalf("%s: finding %q", when, f)
			}
		}
		if err != nil && !errors.Is(err, hostlog.ErrReceiptFault) {
			t.Fatal(err)
		}
	})
}
