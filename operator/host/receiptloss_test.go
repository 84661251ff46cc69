package host_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stewardrt/steward/appliance"
	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// bigApp is the reference application behind a front that, when big is
// set, answers itself with a body larger than a journal segment, so that
// the outcome record (which holds the answer) needs a segment of its own:
// on a full disk its preallocation fails, after the reservation landed.
type bigApp struct {
	calls atomic.Int64
	big   atomic.Bool
}

// bigAnswer is a valid JSON answer of about 100 KiB.
var bigAnswer = []byte(`{"note":"` + strings.Repeat("x", 100<<10) + `"}`)

// callOrLost is call for the dispatch during which the host's journal
// stops: the host answers it uncertain, but it exits at once, and the
// answer may be lost with the connection (lost); the controller then has
// the attempt uncertain too, and the host's restart says so.
func callOrLost(t *testing.T, cl *wire.Client, d msg.Dispatch) (res msg.DispatchResult, lost bool) {
	t.Helper()
	ctx, cancel := peertest.Ctx()
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeDispatch, d)
	if err != nil {
		t.Logf("dispatch %s: the answer was lost as the host exited: %v", d.Attempt, err)
		return msg.DispatchResult{}, true
	}
	if err := env.Decode(&res); err != nil {
		t.Fatalf("dispatch %s: %s: %v", d.Attempt, env.T, err)
	}
	return res, false
}

func startBigApp(t *testing.T, dir string) *bigApp {
	a := &bigApp{}
	inner, err := appliance.Start(appliance.Config{Socket: filepath.Join(dir, "app-inner.sock"), State: filepath.Join(dir, "appstate"),
		Capacity: 64, JournalSegmentSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	l, err := net.Listen("unix", filepath.Join(dir, "app.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		if a.big.Load() {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(bigAnswer)
			return
		}
		inner.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return a
}

// TestReceiptRecordOnFullDiskStopsHost: the host store is on a small
// tmpfs; a call answered after the disk filled cannot journal its outcome
// (the receipt record), so the host journal stops for good and the
// steward-operator serve process exits 1 with one line saying why. After
// the restart the receipt chain is intact (the lost receipt is nowhere,
// and nothing was signed on top of it), the attempt is uncertain with its
// charge held once, and dispatching it again is refused.
func TestReceiptRecordOnFullDiskStopsHost(t *testing.T) {
	disk := testenv.SmallTmpfs(t, 1<<20)
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5, NoApp: true, StoreIn: disk, SegmentSize: 64 << 10})
	app := startBigApp(t, w.Dir)
	c := hosttest.StartChild(t, w.Store, "")
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("call before the disk filled: %+v", res)
	}
	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	app.big.Store(true)
	res, lost := callOrLost(t, cl, peertest.InvokeDispatch(t, "a2", "calc.evaluate", `{"expression":"2+2"}`))
	if !lost && (res.Outcome != msg.StateUncertain || res.Detail != "the application answered but the host could not journal the outcome") {
		t.Fatalf("call whose receipt hit the full disk: %+v, want uncertain", res)
	}
	ws := c.WaitExit(t)
	lines := strings.Split(strings.TrimSpace(c.Stderr.String()), "\n")
	last := lines[len(lines)-1]
	if ws.ExitStatus() != cli.ExitFailure || !strings.HasPrefix(last, "steward-operator serve: host journal stopped for good (") ||
		!strings.Contains(last, "a linked record was not written") || !strings.Contains(last, "no space left on device") ||
		!strings.HasSuffix(last, "exiting so that a restart reopens it from disk") {
		t.Fatalf("host after the lost receipt: exit %v, last line %q; want exit 1 saying the journal stopped", ws, last)
	}
	t.Logf("the host said: %s", last)
	filler.Close()
	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}

	checkHeld := func(when string) {
		w.WithStore(t, func(s *operator.Store) {
			p, _ := s.PurseShow("ctl")
			if p.Charged != 10 || p.Balance != 90 {
				t.Fatalf("%s: purse %+v, want a1 charged and a2 held, once each", when, p)
			}
			rep, err := audit.VerifyStore(w.Store)
			if !errors.Is(err, hostlog.ErrReceiptFault) || rep.Receipts != 1 || rep.LastSeq != 1 || len(rep.Findings) != 1 ||
				!strings.Contains(rep.Findings[0], "reservation of attempt a2 (journal record ") ||
				!strings.Contains(rep.Findings[0], "5 charged without a receipt, still held") {
				t.Fatalf("%s: verify %+v, %v; want the chain whole (receipt 1 only) and a2's charge held without a receipt", when, rep, err)
			}
		})
	}
	checkHeld("after the exit")
	c = hosttest.StartChild(t, w.Store, "")
	cl = w.Dial(t)
	if in := peertest.Inspect(t, cl, "a2"); in.State != msg.StateUncertain {
		t.Fatalf("a2 after the restart: %s (%s), want uncertain", in.State, in.Detail)
	}
	before := app.calls.Load()
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "a2", "calc.evaluate", `{"expression":"2+2"}`)), msg.CodeDuplicate, "never delivered twice")
	if app.calls.Load() != before {
		t.Fatal("a2 was delivered again after the restart")
	}
	app.big.Store(false)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "a3", "calc.evaluate", `{"expression":"3+3"}`)); res.Outcome != msg.StateDefinite {
		t.Fatalf("a call after the restart: %+v", res)
	}
	c.Stop(t)
	w.WithStore(t, func(s *operator.Store) {
		rep, err := audit.VerifyStore(w.Store)
		if rep.Receipts != 2 || rep.LastSeq != 2 || len(rep.Findings) != 1 {
			t.Fatalf("after a3: verify %+v, %v; want receipts 1 and 2 chained, a2 still held", rep, err)
		}
	})
}
