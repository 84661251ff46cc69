package host_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/journal/snapshot"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/wire/msg"
)

// TestCrashInsideHostSnapshot: a real host (a child process) serves 30
// calls, makes a snapshot (`history snapshot`), serves 30 more, stops,
// (a clean stop snapshots), serves 30 more armed with a failpoint inside
// a snapshot, and is SIGKILLed there by the next `history snapshot`:
// after the index's sync, before the snapshot file's fsync, after it,
// before and after its rename. Opened again, the store starts from the
// newest complete snapshot (the stop's; the killed one only past its
// rename) and reads as a full replay does; restarted, the host answers every call's inspect with
// its recorded answer, refuses each id again, and every read of the store
// is what a full replay of a copy without snapshots or index gives.
func TestCrashInsideHostSnapshot(t *testing.T) {
	for _, fp := range []string{history.FailAfterIndexSync, snapshot.FailBeforeFsync, snapshot.FailAfterFsync,
		snapshot.FailBeforeRename, snapshot.FailAfterRename} {
		t.Run(fp, func(t *testing.T) {
			w := hosttest.NewWorld(t, hosttest.Opts{Fund: 1_000_000, Price: 1})
			answers := map[string][]byte{}
			c := hosttest.StartChild(t, w.Store, "")
			serveCalls(t, w, answers, 0, 30)
			historySnapshot(t, w.Store)
			serveCalls(t, w, answers, 30, 30)
			c.Stop(t)
			first := newestSnapshot(t, w.Store) // the clean stop's

			c = hosttest.StartChild(t, w.Store, fp)
			serveCalls(t, w, answers, 60, 30)
			code, _, stderr := hosttest.RunCLI("history", "snapshot", "--store", w.Store)
			if code == 0 {
				t.Fatalf("history snapshot succeeded; the host should have died at %s", fp)
			}
			if ws := c.WaitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child exit %v, want SIGKILL at %s; stderr: %s", ws, fp, c.Stderr.String())
			}
			t.Logf("history snapshot, the host killed under it: %s", strings.TrimSpace(stderr))

			full := withoutHistory(t, w.Store)
			w.WithStore(t, func(s *operator.Store) {
				snap, replayed, refused := s.Loaded()
				want := first
				if fp == snapshot.FailAfterRename {
					want = "" // the killed one, whatever its name: not the first
				}
				if len(refused) != 0 || want != "" && snap != want || want == "" && (snap == first || snap == "") {
					t.Fatalf("after a kill at %s: opened from %q (first %q), %d replayed, refused %v", fp, snap, first, replayed, refused)
				}
				r, err := operator.Open(full)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				sameReads(t, s, r)
			})

			c = hosttest.StartChild(t, w.Store, "")
			cl := w.Dial(t)
			for id, body := range answers {
				if in := peertest.Inspect(t, cl, id); in.State != msg.StateDefinite || !bytes.Equal(in.Body, body) {
					t.Fatalf("after a kill at %s: %s is %s %q", fp, id, in.State, in.Body)
				}
			}
			peertest.WantRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a000", peertest.Agent, "c1")), msg.CodeDuplicate, "never delivered twice")
			c.Stop(t)
		})
	}
}

// serveCalls makes n calls a<from>... through the world's route, keeping
// each answer.
func serveCalls(t *testing.T, w *hosttest.World, answers map[string][]byte, from, n int) {
	t.Helper()
	cl := w.Peer.Dial(t, w.Route.Forward, w.Pub)
	defer cl.Close()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("a%03d", i)
		res := peertest.Call(t, cl, hosttest.Calc(t, id, peertest.Agent, "c1"))
		hosttest.WantAnswer(t, res)
		answers[id] = res.Body
	}
}

// newestSnapshot is the name of the newest snapshot in store.
func newestSnapshot(t *testing.T, store string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(store, hosthist.SnapshotDir, "*.snap"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no snapshot in %s: %v", store, err)
	}
	return filepath.Base(names[len(names)-1])
}

// historySnapshot runs `history snapshot` on store and returns the
// snapshot's name.
func historySnapshot(t *testing.T, store string) string {
	t.Helper()
	code, out, stderr := hosttest.RunCLI("history", "snapshot", "--store", store)
	name, ok := strings.CutPrefix(strings.TrimSpace(out), "snapshot ")
	if code != 0 || !ok {
		t.Fatalf("history snapshot: exit %d, %q %q", code, out, stderr)
	}
	return name
}

// withoutHistory is a copy of store without its snapshots and index: its
// open replays the whole journal.
func withoutHistory(t *testing.T, store string) string {
	t.Helper()
	full := journaltest.CopyDir(t, store)
	for _, p := range []string{hosthist.SnapshotDir, filepath.Dir(hosthist.IndexFile)} {
		if err := os.RemoveAll(filepath.Join(full, p)); err != nil {
			t.Fatal(err)
		}
	}
	return full
}
