package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// archiveWorld is a world whose host journal rotates every 32 KiB, so
// that 60 calls fill several segments.
func archiveWorld(t *testing.T) *hosttest.World {
	return hosttest.NewWorld(t, hosttest.Opts{Fund: 1_000_000, Price: 1, SegmentSize: 32 << 10})
}

// historyArchive runs `history archive` and fails unless it archived.
func historyArchive(t *testing.T, store, to string) string {
	t.Helper()
	code, out, stderr := hosttest.RunCLI("history", "archive", "--store", store, "--to", to)
	if code != 0 || !strings.Contains(out, "archived journal records ") {
		t.Fatalf("history archive: exit %d, %q %q", code, out, stderr)
	}
	return out
}

// inspectRefused asks the host for attempt id on cl and returns its
// refusal (nil when it answered).
func inspectRefused(t *testing.T, cl *wire.Client, id string) *msg.Refusal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeInspect, msg.Inspect{Attempt: id})
	if err != nil {
		t.Fatal(err)
	}
	if env.T != msg.TypeRefused {
		return nil
	}
	var r msg.Refusal
	if err := env.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestHistoryArchive: a running host serves 60 calls; `history archive`
// snapshots, exports and verifies the receipts (beside the archive), and
// has the host archive the journal's segments before the snapshot. The
// archive verifies on its own; `receipts verify` reads it and the live
// journal and says so; an archived attempt's inspect, on the forward
// channel and by `attempts inspect`, is refused naming the archive, while
// its id is still a duplicate and a recent one answers. Restarted, the
// host starts from its snapshot and serves on.
func TestHistoryArchive(t *testing.T) {
	w := archiveWorld(t)
	w.Serve(t)
	answers := map[string][]byte{}
	serveCalls(t, w, answers, 0, 60)
	to := filepath.Join(t.TempDir(), "archive-1")
	out := historyArchive(t, w.Store, to)
	t.Logf("history archive: %s", strings.TrimSpace(out))
	a, err := journal.OpenArchive(to)
	if err != nil {
		t.Fatal(err)
	}
	ad := a.Archived()
	if ad.First != 1 || ad.Last < 20 || len(ad.Segments) < 2 {
		t.Fatalf("archived %d..%d in %d segments", ad.First, ad.Last, len(ad.Segments))
	}
	pub, err := hostlog.ReadPub(w.Store)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := os.ReadFile(audit.ReceiptsFileOf(to))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.VerifyFile(rb, pub); err != nil || rep.Receipts != 60 {
		t.Fatalf("the exported receipts: %d, %v", rep.Receipts, err)
	}
	checkArchived(t, w, ad, answers, "a059")
	w.Stop()

	w.Serve(t)
	checkArchived(t, w, ad, answers, "a059")
	serveCalls(t, w, answers, 60, 60)
	to2 := filepath.Join(t.TempDir(), "archive-2")
	historyArchive(t, w.Store, to2)
	a2, err := journal.OpenArchive(to2)
	if err != nil {
		t.Fatal(err)
	}
	if a2.Archived().First != ad.Last+1 || a2.Archived().Prev != ad.Head {
		t.Fatalf("archive 2 starts at %d, not after archive 1's %d and its head", a2.Archived().First, ad.Last)
	}
	checkArchived(t, w, ad, answers, "a119")
	if r := inspectRefused(t, w.Dial(t), "a059"); r == nil || r.Reason != "attempt a059 is archived in archive-2" {
		t.Fatalf("inspect a059 after the second archive: %+v", r)
	}
	w.Stop()

	// Archives moved: verify says where it looked, and reads them where
	// --archive says.
	moved := filepath.Join(t.TempDir(), "moved-1")
	if err := os.Rename(to, moved); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := hosttest.RunCLI("receipts", "verify", "--store", w.Store)
	wantErr := "journal records 1 to " + strconv.FormatUint(ad.Last, 10) + " are archived in archive-1, which does not open (give it with --archive DIR)"
	if code != 1 || !strings.Contains(stderr, wantErr) {
		t.Fatalf("receipts verify, archive 1 moved: exit %d, %q", code, stderr)
	}
	code, out, stderr = hosttest.RunCLI("receipts", "verify", "--store", w.Store, "--archive", moved, "--archive", to2)
	if code != 0 || !strings.Contains(out, "from archive moved-1 ("+moved+"), ") || !strings.Contains(out, "from archive archive-2 (") {
		t.Fatalf("receipts verify --archive: exit %d, %q %q", code, out, stderr)
	}
	code, _, stderr = hosttest.RunCLI("receipts", "verify", "--store", w.Store, "--archive", moved)
	if code != 2 || !strings.Contains(stderr, "the journal's base names 2 archives (archive-1, archive-2), 1 were given") {
		t.Fatalf("receipts verify with one --archive of two: exit %d, %q", code, stderr)
	}

	// Back where they were made, the archives rebuild a host that lost
	// its snapshots and its index: its start replays them and the live
	// journal, and it answers as before.
	if err := os.Rename(moved, to); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{hosthist.SnapshotDir, filepath.Dir(hosthist.IndexFile)} {
		if err := os.RemoveAll(filepath.Join(w.Store, p)); err != nil {
			t.Fatal(err)
		}
	}
	w.Serve(t)
	checkArchived(t, w, ad, answers, "a119")
	w.Stop()
}

// `history archive` refuses, exit 2 and one line, what archives nothing
// (the journal is one segment) and a directory that holds anything.
func TestHistoryArchiveRefusals(t *testing.T) {
	w := archiveWorld(t)
	w.Serve(t)
	answers := map[string][]byte{}
	serveCalls(t, w, answers, 0, 2)
	to := filepath.Join(t.TempDir(), "a")
	code, _, stderr := hosttest.RunCLI("history", "archive", "--store", w.Store, "--to", to)
	if code != 2 || !strings.Contains(stderr, "refused: history archive: journal: ") || !strings.HasSuffix(stderr, "nothing to archive\n") {
		t.Fatalf("history archive of one segment: exit %d, %q", code, stderr)
	}
	serveCalls(t, w, answers, 2, 60)
	if err := os.Mkdir(to, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = hosttest.RunCLI("history", "archive", "--store", w.Store, "--to", to)
	if code != 2 || !strings.Contains(stderr, "is not empty (it holds x) and has no archive manifest: journal: archive directory in use") {
		t.Fatalf("history archive into a directory in use: exit %d, %q", code, stderr)
	}
	code, _, stderr = hosttest.RunCLI("history", "archive", "--store", w.Store)
	if code != 2 || !strings.Contains(stderr, "--to DIR is required") {
		t.Fatalf("history archive without --to: exit %d, %q", code, stderr)
	}
}

// checkArchived checks a host whose journal archived ad, which holds
// a000, and still holds attempt live.
func checkArchived(t *testing.T, w *hosttest.World, ad journal.Archived, answers map[string][]byte, live string) {
	t.Helper()
	cl := w.Dial(t)
	defer cl.Close()
	want := "attempt a000 is archived in " + ad.Name
	if r := inspectRefused(t, cl, "a000"); r == nil || r.Code != msg.CodeArchived || r.Reason != want {
		t.Fatalf("inspect a000 after the archive: %+v, want %s %q", r, msg.CodeArchived, want)
	}
	if in := peertest.Inspect(t, cl, live); in.State != msg.StateDefinite || string(in.Body) != string(answers[live]) {
		t.Fatalf("inspect %s, live: %s %q", live, in.State, in.Body)
	}
	peertest.WantRefusal(t, peertest.Call(t, cl, hosttest.Calc(t, "a000", peertest.Agent, "c1")), msg.CodeDuplicate, "never delivered twice")
	code, _, stderr := hosttest.RunCLI("attempts", "inspect", "a000", "--store", w.Store)
	if code != 2 || stderr != "steward-operator attempts inspect: refused: "+want+"\n" {
		t.Fatalf("attempts inspect a000: exit %d, %q", code, stderr)
	}
	code, vout, stderr := hosttest.RunCLI("receipts", "verify", "--store", w.Store)
	wantRead := "journal records 1.." + strconv.FormatUint(ad.Last, 10) + " from archive " + ad.Name + " (" + ad.Dir + "), " + strconv.FormatUint(ad.Last+1, 10) + ".."
	if code != 0 || !strings.Contains(vout, wantRead) {
		t.Fatalf("receipts verify: exit %d, %q %q; want it to say %q", code, vout, stderr, wantRead)
	}
}

// TestCrashInsideHostArchive: a real host (a child process) serving 60
// calls is SIGKILLed at each of the journal's archive failpoints by
// `history archive`; restarted, it serves, and the same `history archive`
// run again completes the archive: the journal opens from the archive's
// base, `receipts verify` reads the archive and the live journal, an
// archived attempt is refused naming the archive and a live one answers.
func TestCrashInsideHostArchive(t *testing.T) {
	for _, fp := range []string{journal.FailArchiveCopied, journal.FailArchiveRenamed, journal.FailArchiveBaseTmp,
		journal.FailArchiveBased, journal.FailArchiveRemoving} {
		t.Run(fp, func(t *testing.T) {
			w := archiveWorld(t)
			answers := map[string][]byte{}
			c := hosttest.StartChild(t, w.Store, fp)
			serveCalls(t, w, answers, 0, 60)
			to := filepath.Join(t.TempDir(), "archive-1")
			code, _, stderr := hosttest.RunCLI("history", "archive", "--store", w.Store, "--to", to)
			if code == 0 {
				t.Fatalf("history archive succeeded; the host should have died at %s", fp)
			}
			if ws := c.WaitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child exit %v, want SIGKILL at %s; stderr: %s", ws, fp, c.Stderr.String())
			}
			t.Logf("history archive, the host killed under it: %s", strings.TrimSpace(stderr))

			c = hosttest.StartChild(t, w.Store, "")
			historyArchive(t, w.Store, to)
			a, err := journal.OpenArchive(to)
			if err != nil {
				t.Fatal(err)
			}
			checkArchived(t, w, a.Archived(), answers, "a059")
			c.Stop(t)
		})
	}
}
