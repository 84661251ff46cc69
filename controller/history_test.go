package controller

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// watch is what a test sees of the controller's history (historyHooks).
type watch struct {
	opened chan history.Opened
	snaps  chan [2]uint64 // a snapshot's mark seq and the requestIds forgotten after it
}

func newWatch() *watch {
	return &watch{opened: make(chan history.Opened, 4), snaps: make(chan [2]uint64, 64)}
}

func (w *watch) hooks() *historyHooks {
	return &historyHooks{
		opened:      func(op history.Opened) { w.opened <- op },
		snapshotted: func(m journal.Mark, n int) { w.snaps <- [2]uint64{m.Seq, uint64(n)} },
	}
}

// start runs the stack's controller with the hooks and every snapshot
// after every records, and returns what history.Open did.
func (w *watch) start(s *stack, every uint64) history.Opened {
	s.t.Helper()
	s.startControllerWith(Options{SnapshotEvery: every, hooks: w.hooks()})
	return <-w.opened
}

// snapshotPast waits for the keeper's first snapshot at or past seq and
// returns how many requestIds left memory after it (the keeper makes one
// at its tick once enough records are durable: nothing is slept).
func (w *watch) snapshotPast(t *testing.T, ctx context.Context, seq uint64) uint64 {
	t.Helper()
	for {
		select {
		case s := <-w.snaps:
			if s[0] >= seq {
				return s[1]
			}
		case <-ctx.Done():
			t.Fatalf("no snapshot past record %d", seq)
		}
	}
}

// rawCall is one oracle_call's text content, as the agent reads it.
func rawCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) (ToolResult, string) {
	t.Helper()
	r, res := call(t, ctx, cs, ToolCall, args)
	if len(res.Content) != 1 {
		t.Fatalf("%d contents", len(res.Content))
	}
	return r, res.Content[0].(*mcp.TextContent).Text
}

// fullReplay is the ledger a whole replay of the stack's journal gives,
// into a new index: its encoding and the index's requestIds (key and
// value in hex). The journal is read read-only: the controller may run.
func fullReplay(t *testing.T, s *stack) ([]byte, map[string]string) {
	t.Helper()
	j, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	x, err := index.Open(filepath.Join(t.TempDir(), "index", "history.db"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	l := ledger.NewIndexed(x)
	if err := l.Replay(j); err != nil {
		t.Fatal(err)
	}
	b, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b, indexEntries(t, x)
}

// indexEntries is the requests bucket of x.
func indexEntries(t *testing.T, x *index.Index) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := x.Range(ledger.RequestsBucket, nil, func(k, v []byte) error {
		out[hex.EncodeToString(k)] = hex.EncodeToString(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// controllerIndex is the stack's history index, read with the controller
// stopped.
func controllerIndex(t *testing.T, s *stack) map[string]string {
	t.Helper()
	x, err := index.Open(IndexPath(s.cfg), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	return indexEntries(t, x)
}

// sameAsFullReplay fails unless the ledger op opened is the one a whole
// replay of the journal gives.
func sameAsFullReplay(t *testing.T, s *stack, op history.Opened) {
	t.Helper()
	got, err := op.State.(*ledger.Ledger).Encode()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fullReplay(t, s)
	if !bytes.Equal(got, want) {
		t.Fatalf("the ledger opened from %q (replayed %d) is not the whole replay's", op.Snapshot, op.Replayed)
	}
}

// sameIndexAsFullReplay fails unless the stopped controller's index holds
// what a whole replay's does.
func sameIndexAsFullReplay(t *testing.T, s *stack) {
	t.Helper()
	_, want := fullReplay(t, s)
	got := controllerIndex(t, s)
	if len(got) != len(want) {
		t.Fatalf("the index holds %d requestIds, a whole replay's %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("index entry %s: %q, a whole replay's %q", k, got[k], v)
		}
	}
}

// TestPastRequestIDReplays: a requestId answered long ago answers byte
// for byte what it answered while its entry was in memory: after the
// keeper's snapshot dropped it from memory, after a restart from a
// snapshot, after a full replay (no snapshot, no index), and after its
// index was found damaged (moved aside, kept as evidence, rebuilt).
func TestPastRequestIDReplays(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	w := newWatch()
	w.start(s, 2)
	cs := s.client(ctx)
	args := callArgs("old-1", map[string]any{"text": "long ago"})
	first, _ := rawCall(t, ctx, cs, args)
	answered := s.lastSeq()
	again, want := rawCall(t, ctx, cs, args)
	if !again.Replayed || again.AttemptID != first.AttemptID || !bytes.Equal(again.Body, first.Body) || again.Status != first.Status {
		t.Fatalf("the replay from memory: %+v, first %+v", again, first)
	}
	rawCall(t, ctx, cs, callArgs("filler-1", map[string]any{"text": "x"}))
	if n := w.snapshotPast(t, ctx, answered); n == 0 {
		t.Fatal("the snapshot past the answer dropped no requestId from memory")
	}
	check := func(when string) {
		t.Helper()
		cs := s.client(ctx)
		if _, got := rawCall(t, ctx, cs, args); got != want {
			t.Fatalf("%s: the replay answers\n%s\nwant\n%s", when, got, want)
		}
	}
	check("from the index, after the snapshot")

	s.stopController()
	if op := w.start(s, 2); op.Snapshot == "" || op.Replayed != 0 {
		t.Fatalf("restart: from %q, replayed %d; want the last snapshot, nothing to replay", op.Snapshot, op.Replayed)
	}
	check("after a restart from the snapshot")

	s.stopController()
	aside := t.TempDir()
	for _, p := range []string{ledger.SnapshotDir(s.cfg.JournalDir()), filepath.Dir(IndexPath(s.cfg))} {
		if err := os.Rename(p, filepath.Join(aside, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	op := w.start(s, 2)
	if op.Snapshot != "" || op.Replayed != s.lastSeq() {
		t.Fatalf("without snapshots: from %q, replayed %d of %d", op.Snapshot, op.Replayed, s.lastSeq())
	}
	sameAsFullReplay(t, s, op)
	check("after a full replay")

	s.stopController()
	garbage := bytes.Repeat([]byte("not a bbolt file "), 512)
	if err := os.WriteFile(IndexPath(s.cfg), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	op = w.start(s, 2)
	if kept, err := os.ReadFile(IndexPath(s.cfg) + DamagedSuffix); err != nil || !bytes.Equal(kept, garbage) {
		t.Fatalf("the damaged index was not kept aside as it was: %v", err)
	}
	if op.Snapshot != "" || len(op.Rejected) == 0 || !strings.Contains(op.Rejected[0].Reason, "the history index covers records up to 0") {
		t.Fatalf("with a new index: from %q, rejected %+v; want every snapshot refused, the index covering nothing", op.Snapshot, op.Rejected)
	}
	sameAsFullReplay(t, s, op)
	check("after the damaged index was rebuilt")
	s.stopController()
	sameIndexAsFullReplay(t, s)
}

// TestHistoryCrashFailpoints kills the controller (a child process,
// SIGKILL) at each failpoint of the keeper's snapshot: after the index
// synced and before the snapshot, and inside the snapshot's write. The
// controller started again opens to the ledger a whole replay gives (the
// index ahead of every snapshot, a temporary left, a snapshot not yet
// fsync'd), answers the requestId answered before the crash byte for
// byte as before, and its index ends as a whole replay's.
func TestHistoryCrashFailpoints(t *testing.T) {
	for _, fp := range []string{history.FailAfterIndexSync, snapshot.FailBeforeFsync, snapshot.FailAfterFsync,
		snapshot.FailBeforeRename, snapshot.FailAfterRename} {
		t.Run(fp, func(t *testing.T) {
			s := newStack(t, stackOpts{})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			child := s.startChildArgs([]string{"--snapshot-every", "2"}, "STEWARD_FAILPOINT="+fp)
			cs := s.client(ctx)
			args := callArgs("before-crash", map[string]any{"text": "once"})
			_, want := rawCall(t, ctx, cs, args)
			_, replayed := rawCall(t, ctx, cs, args)
			select {
			case err := <-child.done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("controller exit: %v, want SIGKILL at %s", err, fp)
				}
			case <-ctx.Done():
				t.Fatalf("the controller did not reach %s", fp)
			}
			w := newWatch()
			op := w.start(s, 2)
			// What the crash left: a snapshot only once it was renamed
			// into place, a temporary (removed and reported) before.
			switch {
			case fp == snapshot.FailAfterRename && op.Snapshot == "":
				t.Fatalf("after the rename, the snapshot was not used (rejected %+v)", op.Rejected)
			case fp != snapshot.FailAfterRename && op.Snapshot != "":
				t.Fatalf("a snapshot %s was used, which the crash at %s left unwritten", op.Snapshot, fp)
			case fp != snapshot.FailAfterRename && fp != history.FailAfterIndexSync && len(op.Cleaned) != 1:
				t.Fatalf("cleaned %v; want the temporary of the interrupted write", op.Cleaned)
			}
			sameAsFullReplay(t, s, op)
			if _, got := rawCall(t, ctx, s.client(ctx), args); got != replayed {
				t.Fatalf("after the crash the replay answers\n%s\nwant\n%s (first answer %s)", got, replayed, want)
			}
			s.stopController()
			sameIndexAsFullReplay(t, s)
		})
	}
}

// TestSnapshotOfAnotherJournal: a snapshot made of another journal (the
// same config, so that nothing but the records differ) is refused by
// name, saying that its mark does not match this journal, and the
// controller opens from its own older snapshot to the ledger a whole
// replay gives.
func TestSnapshotOfAnotherJournal(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := newWatch()
	for i := range 2 { // two sessions, two snapshots at their stops
		w.start(s, history.DefaultEvery)
		rawCall(t, ctx, s.client(ctx), callArgs("own-"+string(rune('a'+i)), map[string]any{"text": "x"}))
		s.stopController()
	}
	snaps := ledger.SnapshotDir(s.cfg.JournalDir())
	des, err := os.ReadDir(snaps)
	if err != nil || len(des) != 2 {
		t.Fatalf("snapshots %v, %v; want two", des, err)
	}
	// The newest one goes (the index still covers its mark), and one of
	// another journal, with a mark between the two, takes its place.
	if err := os.Remove(filepath.Join(snaps, des[1].Name())); err != nil {
		t.Fatal(err)
	}
	_, raw, err := LoadConfig(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := canonjson.CanonicalJSON(raw)
	other, err := journal.Open(filepath.Join(t.TempDir(), "journal"), journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: canon})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	first, _ := strconv.ParseUint(strings.TrimSuffix(des[0].Name(), ".snap"), 10, 64)
	for other.LastSeq() < first+1 {
		if _, err := other.Append(ledger.KindFgSubmit, ledger.FgSubmit{ID: "fg-" + strconv.FormatUint(other.LastSeq(), 10), Tool: "oracle_call"}); err != nil {
			t.Fatal(err)
		}
	}
	l := ledger.NewIndexed(ledger.Discard())
	if err := l.Replay(other); err != nil {
		t.Fatal(err)
	}
	st, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := snapshot.Write(snaps, snapshot.Snapshot{Format: ledger.StateFormat, Version: ledger.StateVersion, Mark: other.Mark(), State: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	op := w.start(s, history.DefaultEvery)
	defer s.stopController()
	if len(op.Rejected) != 1 || op.Rejected[0].Name != foreign.Name || !errors.Is(op.Rejected[0].Err, journal.ErrMarkMismatch) ||
		!strings.Contains(op.Rejected[0].Reason, "does not match") {
		t.Fatalf("rejected %+v; want %s refused, its mark not this journal's", op.Rejected, foreign.Name)
	}
	t.Logf("refused: %s: %s", op.Rejected[0].Name, op.Rejected[0].Reason)
	if op.Snapshot != des[0].Name() {
		t.Fatalf("opened from %q, want the older own snapshot %s", op.Snapshot, des[0].Name())
	}
	sameAsFullReplay(t, s, op)

	// The two read-only opens, the controller's (journal/history) and the
	// installer's (ledger.OpenReadOnly), refuse the same snapshot, start
	// from the same one and give the same ledger, the daemon running.
	k, viaHistory, err := openReadOnly(s.cfg.JournalDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ro, err := ledger.OpenReadOnly(s.cfg.JournalDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Journal.Close()
	a, err := viaHistory.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ro.Ledger.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || ro.Snapshot != des[0].Name() || len(ro.Rejected) != 1 || ro.Rejected[0].Name != foreign.Name {
		t.Fatalf("the installer's read-only open: from %q, rejected %+v, the same ledger %v", ro.Snapshot, ro.Rejected, bytes.Equal(a, b))
	}
}

// TestChaosSnapshots: the controller (the real binary, a snapshot every 6
// records) is SIGKILLed again and again at random points while two
// agents call, new requestIds and old ones; then it opens to the ledger a
// whole replay of its journal gives, every requestId answered before
// answers again from its attempt, and its index ends as a whole replay's.
func TestChaosSnapshots(t *testing.T) {
	s := newStack(t, stackOpts{funded: 1 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var mu sync.Mutex
	answered := map[string]string{} // requestId -> attempt
	for round := range 6 {
		child := s.startChildArgs([]string{"--snapshot-every", "6"})
		load, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var calls atomic.Int64
		// The kill comes after a random number of calls: a random point
		// of the journal relative to the snapshots.
		target, kill, once := int64(4+r.IntN(24)), make(chan struct{}), sync.Once{}
		for a := range 2 {
			cs := s.client(ctx)
			wg.Go(func() {
				for n := 0; load.Err() == nil; n++ {
					id := fmt.Sprintf("chaos-%d-%d-%d", round, a, n)
					if n%3 == 2 { // an earlier one again
						id = fmt.Sprintf("chaos-%d-%d-%d", round, a, n-2)
					}
					res, err := cs.CallTool(load, &mcp.CallToolParams{Name: ToolCall, Arguments: callArgs(id, map[string]any{"text": id})})
					if err != nil {
						return // the controller died under the call
					}
					var tr ToolResult
					if len(res.Content) == 1 {
						json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &tr)
					}
					if tr.Outcome == "definite" {
						mu.Lock()
						answered[id] = tr.AttemptID
						mu.Unlock()
					}
					if calls.Add(1) >= target {
						once.Do(func() { close(kill) })
					}
				}
			})
		}
		select {
		case <-kill:
		case <-ctx.Done():
			t.Fatalf("round %d: %d calls answered of %d", round, calls.Load(), target)
		}
		child.cmd.Process.Kill()
		<-child.done
		stop()
		wg.Wait()
	}
	w := newWatch()
	op := w.start(s, 6)
	sameAsFullReplay(t, s, op)
	t.Logf("%d requestIds answered over 6 kills; reopened from %q, replayed %d", len(answered), op.Snapshot, op.Replayed)
	cs := s.client(ctx)
	for id, attempt := range answered {
		r, _ := call(t, ctx, cs, ToolCall, callArgs(id, map[string]any{"text": id}))
		if !r.Replayed || r.AttemptID != attempt {
			t.Fatalf("requestId %s: %+v, want a replay of attempt %s", id, r, attempt)
		}
	}
	s.stopController()
	sameIndexAsFullReplay(t, s)
}
