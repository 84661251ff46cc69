package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/snapshot"
	"github.com/stewardrt/steward/wire/msg"
)

// archSegment is the journal segment size of the archive tests: a few
// calls fill several segments.
const archSegment = 4096

// archCalls makes n calls with requestIds prefix-0 to prefix-(n-1) and
// returns their results by requestId.
func archCalls(t *testing.T, ctx context.Context, cs *mcp.ClientSession, prefix string, n int) map[string]ToolResult {
	t.Helper()
	out := map[string]ToolResult{}
	for i := range n {
		rid := fmt.Sprintf("%s-%d", prefix, i)
		r, res := call(t, ctx, cs, ToolCall, callArgs(rid, map[string]any{"text": rid}))
		if res.IsError || r.Outcome != msg.StateDefinite {
			t.Fatalf("call %s: %+v", rid, r)
		}
		out[rid] = r
	}
	return out
}

// ctlRun runs the steward-controller binary with args and returns its
// stdout, stderr and exit code.
func ctlRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(controllerBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatal(err)
	return "", "", -1
}

// archiveCmd runs `history archive` of the stack into dir.
func archiveCmd(t *testing.T, s *stack, dir string) (string, string, int) {
	t.Helper()
	return ctlRun(t, "history", "archive", "--config", s.cfgPath, "--to", dir)
}

// archived is what an archive holds of the controller's calls: every
// host receipt of its records (signed bytes), and the requestIds whose
// answer record is in it.
type archived struct {
	receipts [][]byte
	answered map[string]string // requestId -> attempt
	first    uint64
	last     uint64
}

func readArchived(t *testing.T, dir string) archived {
	t.Helper()
	a, err := journal.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := archived{answered: map[string]string{}, first: a.Archived().First, last: a.Archived().Last}
	rids := map[string]string{}
	if err := a.Iterate(0, func(r journal.Record) error {
		switch r.Kind {
		case ledger.KindBegin:
			var b ledger.Begin
			if err := ledger.Decode(r, &b); err != nil {
				return err
			}
			rids[b.Attempt] = b.RequestID
		case ledger.KindResult:
			var x ledger.Result
			if err := ledger.Decode(r, &x); err != nil {
				return err
			}
			if x.Receipt != nil {
				out.receipts = append(out.receipts, x.Receipt)
			}
			if rid, ok := rids[x.Attempt]; ok && x.Outcome == msg.StateDefinite {
				out.answered[rid] = x.Attempt
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReceiptsFile checks DIR.receipts: 0600, the pinned host key, and
// exactly want's receipts, each verifying, in the host's order.
func checkReceiptsFile(t *testing.T, s *stack, dir string, want [][]byte) {
	t.Helper()
	path := ReceiptsFileOf(dir)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v", path, fi.Mode())
	}
	b, _ := os.ReadFile(path)
	f, err := msg.UnmarshalReceiptsFile(b)
	if err != nil {
		t.Fatal(err)
	}
	bind, err := LoadBundle(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.HostKey, bind.HostKey.MarshalCOSEKey()) {
		t.Fatal("the receipts file names another host key than the pinned one")
	}
	var last uint64
	for i, signed := range f.Receipts {
		rc, err := msg.VerifyReceipt(signed, bind.HostRing)
		if err != nil || rc.Seq <= last {
			t.Fatalf("receipt %d of the file: %v (seq %d after %d)", i+1, err, rc.Seq, last)
		}
		last = rc.Seq
	}
	sortBytes := func(l [][]byte) [][]byte {
		l = append([][]byte(nil), l...)
		sort.Slice(l, func(i, j int) bool { return bytes.Compare(l[i], l[j]) < 0 })
		return l
	}
	if len(want) == 0 || !reflect.DeepEqual(sortBytes(f.Receipts), sortBytes(want)) {
		t.Fatalf("the receipts file holds %d receipts, the archive %d (or they differ)", len(f.Receipts), len(want))
	}
	cmp, err := CompareReceipts(s.cfgPath, b)
	if err != nil {
		t.Fatalf("receipts compare --file %s: %v", path, err)
	}
	if cmp.Matched != len(want) || cmp.Exported != len(want) {
		t.Fatalf("receipts compare of the archive's receipts: %+v", cmp)
	}
}

// archivedText is what an agent reads of a call again with an archived
// requestId.
func archivedText(rid, name string) string {
	return fmt.Sprintf("requestId %q is archived in %s: its recorded answer is not served again and nothing was sent; a new call needs a new requestId", rid, name)
}

// replayArchived calls again with archived requestId rid: refused with
// the exact line, the archive named and no path of it, nothing journaled
// and nothing charged.
func replayArchived(t *testing.T, ctx context.Context, s *stack, cs *mcp.ClientSession, rid, attempt, dir string) {
	t.Helper()
	seq, bal := s.lastSeq(), s.purse().Balance
	r, text := rawCall(t, ctx, cs, callArgs(rid, map[string]any{"text": rid}))
	if r.Refusal == nil || r.Refusal.Code != msg.CodeArchived || r.Refusal.Reason != archivedText(rid, filepath.Base(dir)) || r.AttemptID != attempt || r.Replayed {
		t.Fatalf("a call again with archived requestId %s: %+v", rid, r)
	}
	if strings.Contains(text, filepath.Dir(dir)) || strings.Contains(text, "journal.") || strings.Contains(text, "Error") {
		t.Fatalf("the agent's text names a path or a Go type: %s", text)
	}
	if s.lastSeq() != seq {
		t.Fatalf("the refused call journaled %d records (a new begin)", s.lastSeq()-seq)
	}
	if s.purse().Balance != bal {
		t.Fatal("the refused call was sent to the host and charged")
	}
}

// TestHistoryArchiveServing archives the journal of a controller that
// serves calls, through its foreground socket: the receipts file holds
// exactly the archived records' receipts and verifies, an archived
// requestId is refused naming the archive (nothing sent), a recent one
// still replays, inspect of an archived attempt names the archive, and
// after a restart all of it is the same.
func TestHistoryArchiveServing(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s.startControllerWith(Options{JournalSegmentSize: archSegment})
	cs := s.client(ctx)
	results := archCalls(t, ctx, cs, "arch", 10)

	// Calls go on while the archive runs: it takes no lock they wait on,
	// and what they journal after the snapshot's mark stays live.
	stop, loadDone := make(chan struct{}), make(chan int, 1)
	load := s.client(ctx)
	go func() {
		n := 0
		for ; ; n++ {
			select {
			case <-stop:
				loadDone <- n
				return
			default:
			}
			rid := fmt.Sprintf("live-%d", n)
			res, err := load.CallTool(ctx, &mcp.CallToolParams{Name: ToolCall, Arguments: callArgs(rid, map[string]any{"text": rid})})
			if err != nil || res.IsError {
				t.Errorf("a call while the archive runs: %v %+v", err, res)
			}
		}
	}()
	dir := filepath.Join(s.dir, "ctl-archive-1")
	out, errs, code := archiveCmd(t, s, dir)
	close(stop)
	t.Logf("%d calls answered while the archive ran", <-loadDone)
	if code != 0 {
		t.Fatalf("history archive: exit %d: %s%s", code, out, errs)
	}
	a := readArchived(t, dir)
	j, _ := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	base, based := j.Base()
	j.Close()
	if !based || base.Seq != a.last || base.Archives[0].Dir != dir {
		t.Fatalf("the journal's base: %+v %v, the archive ends at %d", base, based, a.last)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantLast := fmt.Sprintf("archived journal records %d..%d (", a.first, a.last)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], fmt.Sprintf("receipts of journal records %d..%d exported to %s (%d receipts, verified", a.first, a.last, ReceiptsFileOf(dir), len(a.receipts))) ||
		!strings.HasPrefix(lines[1], wantLast) || !strings.Contains(lines[1], ") in "+dir+", before the snapshot at record ") {
		t.Fatalf("history archive printed:\n%s", out)
	}
	checkReceiptsFile(t, s, dir, a.receipts)
	if len(a.answered) == 0 {
		t.Fatal("no answer archived")
	}

	var rid, attempt string
	for r, at := range a.answered {
		rid, attempt = r, at
		break
	}
	replayArchived(t, ctx, s, cs, rid, attempt, dir)
	// A call after the archive, and again: its answer replays.
	recent := "after-0"
	for k, v := range archCalls(t, ctx, cs, "after", 1) {
		results[k] = v
	}
	if r, _ := call(t, ctx, cs, ToolCall, callArgs(recent, map[string]any{"text": recent})); !r.Replayed || r.ReceiptID != results[recent].ReceiptID {
		t.Fatalf("a recent requestId after the archive: %+v", r)
	}
	wantInspect := fmt.Sprintf("steward-controller: refused: attempt %s is archived in %s\n", attempt, filepath.Base(dir))
	if _, errs, code := ctlRun(t, "attempts", "inspect", attempt, "--config", s.cfgPath); code != ExitRefused || errs != wantInspect {
		t.Fatalf("attempts inspect of an archived attempt (running): exit %d: %q", code, errs)
	}

	s.stopController()
	w := newWatch()
	op := w.start(s, 0)
	if op.Snapshot == "" || op.From.Seq < a.last {
		t.Fatalf("the restart after the archive loaded %q at %d, the base is at %d", op.Snapshot, op.From.Seq, a.last)
	}
	cs = s.client(ctx)
	replayArchived(t, ctx, s, cs, rid, attempt, dir)
	s.stopController()
	// Stopped, the command opens the journal itself and logs what it
	// loaded before the line.
	if _, errs, code := ctlRun(t, "attempts", "inspect", attempt, "--config", s.cfgPath); code != ExitRefused || lastLine(errs) != wantInspect {
		t.Fatalf("attempts inspect of an archived attempt (stopped): exit %d: %q", code, errs)
	}
	// With no snapshot left, the installer's read-only open (the
	// keeper's twin without the index) replays the archive where it was
	// made and the live journal, as the keeper's full replay does.
	snaps := ledger.SnapshotDir(s.cfg.JournalDir())
	if err := os.RemoveAll(snaps); err != nil {
		t.Fatal(err)
	}
	ro, err := ledger.OpenReadOnly(s.cfg.JournalDir())
	if err != nil {
		t.Fatalf("a read-only open with no snapshot after the archive: %v", err)
	}
	defer ro.Journal.Close()
	if ro.Snapshot != "" || ro.Journal.LastSeq() <= a.last {
		t.Fatalf("the read-only open loaded %q and reads to record %d, the archive ends at %d", ro.Snapshot, ro.Journal.LastSeq(), a.last)
	}
}

// lastLine is the last line of s, with its newline.
func lastLine(s string) string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return l[len(l)-1] + "\n"
}

// journalState is what a refused archive must leave as it was: the
// journal's files and base, and whether the archive directory and the
// receipts file exist.
func journalState(t *testing.T, s *stack, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(s.cfg.JournalDir())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		if e.Name() == "watermark" {
			continue
		}
		fi, _ := e.Info()
		fmt.Fprintf(&b, "%s %d\n", e.Name(), fi.Size())
	}
	for _, p := range []string{dir, ReceiptsFileOf(dir)} {
		_, err := os.Lstat(p)
		fmt.Fprintf(&b, "%s exists %v\n", p, err == nil)
	}
	return b.String()
}

// TestHistoryArchiveRefusals runs each refusal of `history archive` and
// checks its exact line, exit 2, and that nothing changed: the journal's
// files, no archive directory, no receipts file.
func TestHistoryArchiveRefusals(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s.startControllerWith(Options{JournalSegmentSize: 1 << 20})
	cs := s.client(ctx)
	archCalls(t, ctx, cs, "one", 2)
	refused := func(dir, want string) {
		t.Helper()
		before := journalState(t, s, dir)
		_, errs, code := archiveCmd(t, s, dir)
		if code != ExitRefused || errs != "steward-controller: refused: history archive: "+want+"\n" {
			t.Fatalf("exit %d: %q\nwant the refusal %q", code, errs, want)
		}
		if after := journalState(t, s, dir); after != before {
			t.Fatalf("the refusal changed:\n%s\nto\n%s", before, after)
		}
	}
	// Every record is in the one segment being appended to.
	dir := filepath.Join(s.dir, "arch-none")
	refused(dir, "nothing to archive: no whole journal segment precedes the snapshot's mark at record "+fmt.Sprint(s.lastSeq()))

	inUse := filepath.Join(s.dir, "arch-in-use")
	if err := os.MkdirAll(inUse, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(inUse, "notes"), []byte("mine"), 0o600)
	refused(inUse, "the archive directory "+inUse+" is in use: it must be absent or empty")
	refused(filepath.Join(s.cfg.JournalDir(), "x"), "the archive directory "+filepath.Join(s.cfg.JournalDir(), "x")+" is inside the journal "+s.cfg.JournalDir())
	s.stopController()

	// A journal of small segments, archived once: the same command again
	// (and one into another directory, nothing recorded since) archives
	// nothing.
	s2 := newStack(t, stackOpts{})
	s2.startControllerWith(Options{JournalSegmentSize: archSegment})
	cs2 := s2.client(ctx)
	archCalls(t, ctx, cs2, "two", 8)
	done := filepath.Join(s2.dir, "arch-done")
	if out, errs, code := archiveCmd(t, s2, done); code != 0 {
		t.Fatalf("history archive: exit %d: %s%s", code, out, errs)
	}
	a := readArchived(t, done)
	s = s2
	before, _ := os.ReadFile(ReceiptsFileOf(done))
	refused(done, fmt.Sprintf("records %d..%d are archived in %s already", a.first, a.last, filepath.Base(done)))
	if after, _ := os.ReadFile(ReceiptsFileOf(done)); !bytes.Equal(before, after) {
		t.Fatal("the refused rerun rewrote the archive's receipts file")
	}
	refused(filepath.Join(s2.dir, "arch-again"), "nothing to archive: no whole journal segment precedes the snapshot's mark at record "+fmt.Sprint(s2.lastSeq()))
	s2.stopController()

	// The refusals the command cannot reach, on the stopped controller:
	// a mark the journal refuses and one past the newest snapshot's.
	c, err := open(s2.cfgPath, nil, historyOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.j.Mark()
	bad := m
	bad.Head = bytes.Repeat([]byte{7}, 32)
	other := filepath.Join(s2.dir, "arch-bad")
	_, jerr := c.j.Archive(other, bad)
	if !errors.Is(jerr, journal.ErrMarkMismatch) {
		t.Fatalf("the journal took a mark of another log: %v", jerr)
	}
	if _, err := c.archiveUpTo(other, bad); !errors.Is(err, ErrRefused) || err.Error() != "refused: history archive: "+jerr.Error() {
		t.Fatalf("a mismatched mark: %v", err)
	}
	past := m
	past.Seq = c.hist.keeper.LastMark().Seq + 1
	if _, err := c.archiveUpTo(other, past); !errors.Is(err, ErrRefused) || err.Error() != fmt.Sprintf(
		"refused: history archive: the mark at record %d is past the newest snapshot's (record %d): archive up to a snapshot's mark", past.Seq, past.Seq-1) {
		t.Fatalf("a mark past the newest snapshot: %v", err)
	}
	if _, err := c.HistoryArchive("relative/dir"); !errors.Is(err, ErrRefused) || err.Error() != `refused: history archive: the archive directory "relative/dir" is not absolute` {
		t.Fatalf("a relative directory: %v", err)
	}
	// Only the controller's own account may ask it on the foreground socket.
	self := uint32(os.Geteuid())
	rep := c.foreground(ctx, foreground.Request{Op: foreground.OpHistoryArchive, Dir: other}, self+1)
	if !rep.Refused || rep.Error != fmt.Sprintf("refused: history-archive may be asked only by the controller's own account (uid %d), not uid %d", self, self+1) {
		t.Fatalf("history-archive from another account: %+v", rep)
	}
	if _, err := os.Lstat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refusal made %s: %v", other, err)
	}
}

// TestHistorySnapshotCommand makes a snapshot through the running
// controller and on the stopped one, also when none is due.
func TestHistorySnapshotCommand(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s.startController()
	archCalls(t, ctx, s.client(ctx), "snap", 2)
	seq := s.lastSeq()
	want := fmt.Sprintf("snapshot %s at record %d\n", snapshot.Name(seq), seq)
	if out, errs, code := ctlRun(t, "history", "snapshot", "--config", s.cfgPath); code != 0 || out != want {
		t.Fatalf("history snapshot (running): exit %d: %q %s, want %q", code, out, errs, want)
	}
	if out, _, code := ctlRun(t, "history", "snapshot", "--config", s.cfgPath); code != 0 || out != fmt.Sprintf("nothing recorded since the snapshot at record %d: none written\n", seq) {
		t.Fatalf("history snapshot again: exit %d: %q", code, out)
	}
	s.stopController()
	if out, _, code := ctlRun(t, "history", "snapshot", "--config", s.cfgPath); code != 0 || out != fmt.Sprintf("nothing recorded since the snapshot at record %d: none written\n", seq) {
		t.Fatalf("history snapshot (stopped): exit %d: %q", code, out)
	}
}
