package host_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/wire/msg"
)

// readOnlyVerbs are the commands docs/OPERATING.md has an operator run
// against a serving host: each reads the store or its journal read-only
// (attempts list asks the host over its admin socket). The world names no
// agent: agent list prints nothing, as attempts list before the first call.
func readOnlyVerbs(store string) [][]string {
	return [][]string{
		{"purse", "show", "ctl", "--store", store},
		{"grant", "list", "--store", store},
		{"route", "list", "--store", store},
		{"agent", "list", "--store", store},
		{"controller", "list", "--store", store},
		{"attempts", "list", "--store", store},
		{"journal", "inspect", "--store", store},
		{"receipts", "verify", "--store", store},
	}
}

// TestReadOnlyVerbsWhileServing runs every read-only verb again and again
// against a real host (a child process) while a controller's calls are
// journaled, and snapshots made every 20 records: every run answers, none
// reports the live journal torn or corrupt (it reads up to the owner's
// watermark, never the batch being written). On a full disk (a small
// tmpfs, filled while the calls go on) the same: the host refuses the
// reservations it cannot journal, and the reads still answer.
func TestReadOnlyVerbsWhileServing(t *testing.T) {
	t.Run("under-load", func(t *testing.T) {
		w := hosttest.NewWorld(t, hosttest.Opts{Fund: 1_000_000, Price: 1, PerDay: 1_000_000})
		readOnlyWhileServing(t, w, nil)
	})
	t.Run("full-disk", func(t *testing.T) {
		disk := testenv.SmallTmpfs(t, 1<<20)
		w := hosttest.NewWorld(t, hosttest.Opts{Fund: 1_000_000, Price: 1, PerDay: 1_000_000, StoreIn: disk, SegmentSize: 16 << 10})
		readOnlyWhileServing(t, w, func() func() {
			f := testenv.FillDisk(t, filepath.Join(disk, "filler"))
			return func() { f.Close(); os.Remove(f.Name()) }
		})
	})
}

// readOnlyWhileServing is the loop of TestReadOnlyVerbsWhileServing; fill,
// when set, fills the disk after the fifth round and returns what empties
// it again.
func readOnlyWhileServing(t *testing.T, w *hosttest.World, fill func() func()) {
	const rounds, maxCalls = 30, 5000
	c := hosttest.StartServe(t, w.Store, "", []string{"--snapshot-every", "20"})
	dispatches := make([]msg.Dispatch, maxCalls)
	for i := range dispatches {
		dispatches[i] = peertest.InvokeDispatch(t, fmt.Sprintf("l%04d", i), "calc.evaluate", fmt.Sprintf(`{"expression":"%d+1"}`, i))
	}
	cl := w.Dial(t)
	stop := make(chan struct{})
	var mu sync.Mutex
	outcomes := map[msg.State]int{} // mu guards outcomes and lost
	lost := false
	var load sync.WaitGroup
	load.Add(1)
	go func() {
		defer load.Done()
		for _, d := range dispatches {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := peertest.Ctx()
			env, err := cl.Call(ctx, msg.TypeDispatch, d)
			cancel()
			var res msg.DispatchResult
			if err == nil {
				err = env.Decode(&res)
			}
			mu.Lock()
			if err != nil {
				lost = true // the host stopped for a receipt it could not journal
			} else {
				outcomes[res.Outcome]++
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range outcomes {
			n += k
		}
		return n
	}
	var empty func()
	// held is what only a host that stopped explains: verify's findings
	// of a reservation held, an admin request cut by the host's exit, an
	// admin socket gone while the exiting host still holds its index.
	var held []string
	runs, during := 0, calls()
	for round := range rounds {
		if round == 5 && fill != nil {
			empty = fill()
		}
		for _, args := range readOnlyVerbs(w.Store) {
			code, out, stderr := hosttest.RunCLI(args...)
			runs++
			if args[0] == "receipts" && code == 1 && strings.Contains(stderr, "charged without a receipt, still held") ||
				args[0] == "attempts" && code == 1 && (strings.Contains(stderr, "the host closed the admin connection before answering") ||
					strings.Contains(stderr, "its admin socket did not answer: it is starting or stopping")) {
				held = append(held, fmt.Sprintf("round %d: %s", round, stderr))
				continue
			}
			if code != 0 || out == "" && args[0] != "agent" && args[0] != "attempts" || strings.Contains(stderr, "corrupt") || strings.Contains(stderr, "torn") {
				t.Errorf("round %d: %s: exit %d, stderr %q", round, strings.Join(args[:2], " "), code, stderr)
			}
		}
	}
	during = calls() - during
	close(stop)
	load.Wait()
	if empty != nil {
		empty()
	}
	mu.Lock()
	t.Logf("%d read-only runs while %d calls were answered (%v), the host lost: %v", runs, during, outcomes, lost)
	if during == 0 {
		t.Fatal("no call was answered while the verbs ran: the loop read an idle host")
	}
	if fill != nil && outcomes[msg.StateRefused] == 0 && !lost {
		t.Fatal("the disk was full and no call was refused: the host journaled as if it were not")
	}
	wasLost := lost
	mu.Unlock()
	// A host that stopped for a receipt it could not journal leaves that
	// call's reservation held, which verify rightly reports, and cuts the
	// admin request it was answering; a serving host does neither.
	switch {
	case len(held) > 0 && wasLost:
		t.Logf("%d runs met the host stopped or its call's reservation held, the first: %s", len(held), held[0])
	case len(held) > 0:
		t.Errorf("%d runs met a serving host as if it had stopped, the first: %s", len(held), held[0])
	}
	if !wasLost {
		// With room again, the host answers calls and the verbs as before.
		for i := range 3 {
			ctx, cancel := peertest.Ctx()
			env, err := cl.Call(ctx, msg.TypeDispatch, peertest.InvokeDispatch(t, fmt.Sprintf("after%d", i), "calc.evaluate", `{"expression":"2+2"}`))
			cancel()
			var res msg.DispatchResult
			if err == nil {
				err = env.Decode(&res)
			}
			if err != nil || res.Outcome != msg.StateDefinite {
				t.Fatalf("a call with room again: %+v %v", res, err)
			}
		}
		for _, args := range readOnlyVerbs(w.Store) {
			if code, _, stderr := hosttest.RunCLI(args...); code != 0 {
				t.Errorf("with room again: %s: exit %d, stderr %q", strings.Join(args[:2], " "), code, stderr)
			}
		}
	}
	if wasLost {
		c.WaitExit(t) // it stopped, exit 1, for the receipt it could not journal
		return
	}
	c.Stop(t)
}

// TestAttemptsListBetweenSocketAndIndex is the window of a host that is
// starting or stopping: it holds the store's history index (here, a
// store opened read-write by the test) while no admin socket answers.
// attempts list says so in one line, exit 1, instead of pointing at the
// socket that did not answer.
func TestAttemptsListBetweenSocketAndIndex(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 1, PerDay: 100})
	s, err := operator.Open(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, out, stderr := hosttest.RunCLI("attempts", "list", "--store", w.Store)
	const want = "steward-operator attempts list: a host holds the store's history index but its admin socket did not answer: it is starting or stopping; run the command again\n"
	if code != cli.ExitFailure || out != "" || stderr != want {
		t.Fatalf("attempts list: exit %d, stdout %q, stderr %q; want exit 1, %q", code, out, stderr, want)
	}
}
