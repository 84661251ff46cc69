package controller

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testenv"
)

// TestIndexFullDisk: the history index alone is on a small tmpfs (the
// journal has room), filled while the controller serves. The keeper's
// snapshots fail (the index's write cannot be made: index.ErrWrite), and
// the controller goes on answering every call, old requestIds included:
// the index keeps what the failed write held and Begin's look-ups still
// find it. Once space is freed a snapshot is made again, without a
// restart; after a stop the ledger is a whole replay's, the index holds
// what a whole replay's does, and every requestId answered replays byte
// for byte.
func TestIndexFullDisk(t *testing.T) {
	testenv.NeedRoot(t, "to mount a small tmpfs for a full disk")
	s := newStack(t, stackOpts{funded: 1 << 20})
	disk := filepath.Dir(IndexPath(s.cfg)) // the index must be a real directory
	if err := os.MkdirAll(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.SmallTmpfsAt(t, disk, 1<<20)
	t.Cleanup(s.stopController) // before the unmount
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	w, logs := newWatch(), &logLines{}
	opts := Options{SnapshotEvery: 2, hooks: w.hooks(), Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s.startControllerWith(opts)
	<-w.opened
	cs := s.client(ctx)
	answers := map[string]string{}
	for i := range 3 {
		id := "before-" + string(rune('a'+i))
		rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id}))
		_, answers[id] = rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id}))
	}
	w.snapshotPast(t, ctx, s.lastSeq())

	filler := testenv.FillDisk(t, filepath.Join(disk, "filler"))
	failed := logs.next("snapshot failed")
	for n, seen := 0, false; !seen; n++ {
		if n == 1000 {
			t.Fatal("a thousand calls with the index's disk full, and no snapshot failed")
		}
		id := fmt.Sprintf("full-%d", n)
		r, _ := rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id}))
		if r.Refusal != nil {
			t.Fatalf("call %d on the index's full disk refused: %+v", n, r.Refusal)
		}
		answers[id] = "" // its replay's answer, below
		select {
		case line := <-failed:
			t.Logf("after %d calls: %s", n+1, strings.TrimSpace(line))
			seen = true
		default:
		}
	}
	for id, text := range answers {
		r, got := rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id}))
		if !r.Replayed || text != "" && got != text {
			t.Fatalf("requestId %s on the full disk replays\n%s\nwant\n%s", id, got, text)
		}
		answers[id] = got // a replay's answer, which every later one is
	}
	select {
	case err := <-s.ctlDone:
		t.Fatalf("the controller stopped on the full disk: %v", err)
	default:
	}

	if err := filler.Truncate(0); err != nil {
		t.Fatal(err)
	}
	rawCall(t, ctx, cs, callArgs("after-room", map[string]any{"text": "room"}))
	w.snapshotPast(t, ctx, s.lastSeq())
	s.stopController()
	sameIndexAsFullReplay(t, s)
	s.startControllerWith(opts)
	op := <-w.opened
	sameAsFullReplay(t, s, op)
	cs = s.client(ctx)
	for id, text := range answers {
		if _, got := rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id})); got != text {
			t.Fatalf("requestId %s replays\n%s\nwant\n%s", id, got, text)
		}
	}
	s.stopController()
}

// TestStopIsNoFailure: at a stop, the keeper's Run returns nil as the
// daemon's context ends, and the wait for the stop may take either: it
// never reports the stop as the history stopping for good (which made
// TestCLIServeHooks fail, under -race, with exit 1 on SIGTERM). Both are
// ready at each of 200 waits, so that the select takes each many times.
func TestStopIsNoFailure(t *testing.T) {
	s := newStack(t, stackOpts{})
	c, err := open(s.cfgPath, slog.New(slog.DiscardHandler), historyOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		done := make(chan error, 1)
		done <- nil
		if err := c.waitStop(ctx, done); err != nil {
			t.Fatalf("wait %d: a stop reported as %v", i, err)
		}
		if len(done) != 1 {
			t.Fatalf("wait %d: the keeper's result was not put back", i)
		}
	}
}
