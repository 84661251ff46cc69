package appliance

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// childCalls sends calls from to from+n-1 to the child on sock and
// returns their answers.
func childCalls(t *testing.T, sock string, from, n int) map[int][]byte {
	t.Helper()
	a := &app{t: t, client: unixClient(sock)}
	defer a.client.CloseIdleConnections()
	got := map[int][]byte{}
	for i := from; i < from+n; i++ {
		status, body := a.invokeBody(callBody(i))
		if status >= 500 || status == 429 {
			t.Fatalf("call %d: %d %s", i, status, body)
		}
		got[i] = body
	}
	return got
}

// killedAt stops the child with SIGTERM and checks that it was killed
// at the armed failpoint, inside its last snapshot.
func (c *child) killedAt(t *testing.T, fp string) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()
	ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed at %s: %v; stderr:\n%s", fp, c.cmd.ProcessState, c.stderr)
	}
}

// TestCrashInsideSnapshot: an appliance answers calls and stops (a
// snapshot); a second one answers more and is SIGKILLed inside the
// snapshot of its stop: after the index's sync, before the snapshot
// file's fsync, after it, before and after its rename. The next start
// uses the newest complete snapshot (the second, killed after its
// rename; else the first), replays what follows it, meeting the answers
// the index already holds from the killed snapshot, and its state is a
// full replay's; the oldest and the newest calls answer byte for byte.
func TestCrashInsideSnapshot(t *testing.T) {
	for _, fp := range []string{history.FailAfterIndexSync, snapshot.FailBeforeFsync, snapshot.FailAfterFsync,
		snapshot.FailBeforeRename, snapshot.FailAfterRename} {
		t.Run(fp, func(t *testing.T) {
			dir := shortDir(t)
			sock, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state")
			c := startChild(t, sock, state)
			answers := childCalls(t, sock, 0, 6)
			c.stop(t)
			first := snapshotNames(t, state)
			c = startChild(t, sock, state, failpoint.Env+"="+fp)
			more := childCalls(t, sock, 6, 6)
			c.killedAt(t, fp)
			for i, b := range more {
				answers[i] = b
			}

			// The kill came after the index's sync: the index covers the
			// whole journal, past the snapshot the start will use.
			last := fullReplay(t, state).Seq
			if covers := indexCovers(t, state); covers != last {
				t.Fatalf("the index covers records up to %d, the journal has %d", covers, last)
			}
			want := first[len(first)-1]
			if fp == snapshot.FailAfterRename {
				want = snapshot.Name(last)
			}
			logs := &bytes.Buffer{}
			a := startApp(t, Config{Socket: sock, State: state, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			st := a.srv.store
			if !strings.Contains(logs.String(), "snapshot="+want) || strings.Contains(logs.String(), "snapshot refused") {
				t.Fatalf("after a kill at %s: want a start from %s; logs:\n%s", fp, want, logs)
			}
			sameAsFull(t, state, st.opened, st.x)
			for _, i := range []int{0, 11} {
				if status, body := a.invokeBody(callBody(i)); status >= 500 || !bytes.Equal(body, answers[i]) {
					t.Fatalf("call %d after the restart: %d %s, first answered %s", i, status, body, answers[i])
				}
			}
		})
	}
}

// indexCovers is the mark the index of state was last synced with.
func indexCovers(t *testing.T, state string) uint64 {
	t.Helper()
	x, err := index.Open(indexPath(state), index.Options{Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	b, ok, err := x.Meta(history.CoversMeta)
	if err != nil || !ok || len(b) != 8 {
		t.Fatalf("the index's %s: %x %v %v", history.CoversMeta, b, ok, err)
	}
	return binary.BigEndian.Uint64(b)
}

// TestSnapshotOfAnotherJournal: a snapshot copied from another
// appliance's state is refused, named with why in a warning, and the
// start is a full replay of this journal.
func TestSnapshotOfAnotherJournal(t *testing.T) {
	ours, theirs := generatedState(t, 12), generatedState(t, 4)
	if err := os.RemoveAll(snapshotDir(ours)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(snapshotDir(theirs), snapshotDir(ours)); err != nil {
		t.Fatal(err)
	}
	foreign := snapshotNames(t, ours)[0]
	logs := &bytes.Buffer{}
	a := startApp(t, Config{State: ours, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	st := a.srv.store
	wantLine := `msg="snapshot refused" snapshot=` + foreign + ` reason="refused: its state: appliance state: of another journal`
	if !strings.Contains(logs.String(), wantLine) || !strings.Contains(logs.String(), `replayed=`) {
		t.Fatalf("logs lack %q:\n%s", wantLine, logs)
	}
	sameAsFull(t, ours, st.opened, st.x)
	if status, body := a.invokeBody(callBody(0)); status != 200 {
		t.Fatalf("oldest call: %d %s", status, body)
	}
}
