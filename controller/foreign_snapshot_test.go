package controller

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/snapshot"
	"github.com/stewardrt/steward/operator/hosthist"
)

// foreignCase is a snapshot file that is not this controller's, planted
// under the name (and at the seq) of its newest own snapshot.
type foreignCase struct {
	name   string
	reason string // what every open's refusal says
	is     error  // what the daemon's refusal matches (errors.Is), nil: unchecked
	file   func(t *testing.T, s *stack, own snapshot.Loaded) []byte
}

// snapshotFile is the file snapshot.Write makes of sn (signed by sign
// when it is not nil), written in a scratch directory.
func snapshotFile(t *testing.T, sn snapshot.Snapshot, sign func([]byte) ([]byte, error)) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snapshots") // Write makes it 0700
	w, err := snapshot.Write(dir, sn, sign)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, w.Name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// anotherKey signs as a key this controller never pinned.
func anotherKey(t *testing.T) func([]byte) ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return func(d []byte) ([]byte, error) { return ed25519.Sign(priv, d), nil }
}

// anotherControllers is a snapshot of another controller's journal (its
// config names another controller) at the same seq as own: this
// controller's format and version, a state that decodes, a mark that is
// not of this journal.
func anotherControllers(t *testing.T, s *stack, own snapshot.Loaded) []byte {
	t.Helper()
	raw, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["name"] = "other"
	raw, _ = json.Marshal(m)
	canon, err := canonjson.CanonicalJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	other, err := journal.Open(filepath.Join(t.TempDir(), "journal"), journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: canon})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for other.LastSeq() < own.Mark.Seq {
		if _, err := other.Append(ledger.KindFgSubmit, ledger.FgSubmit{ID: "fg-" + strconv.FormatUint(other.LastSeq(), 10), Tool: ToolCall}); err != nil {
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
	return snapshotFile(t, snapshot.Snapshot{Format: ledger.StateFormat, Version: ledger.StateVersion, Mark: other.Mark(), State: st}, nil)
}

var foreignCases = []foreignCase{
	{name: "another controller's", reason: "mark does not match the log", is: journal.ErrMarkMismatch, file: anotherControllers},
	{name: "the host's format, signed", reason: fmt.Sprintf("format %q, want %q", hosthist.StateFormat, ledger.StateFormat),
		file: func(t *testing.T, _ *stack, own snapshot.Loaded) []byte {
			return snapshotFile(t, snapshot.Snapshot{Format: hosthist.StateFormat, Version: hosthist.StateVersion, Mark: own.Mark, State: own.State}, anotherKey(t))
		}},
	{name: "another state version", reason: fmt.Sprintf("a state of version %d; this controller reads version %d", ledger.StateVersion+1, ledger.StateVersion),
		file: func(t *testing.T, _ *stack, own snapshot.Loaded) []byte {
			return snapshotFile(t, snapshot.Snapshot{Format: ledger.StateFormat, Version: ledger.StateVersion + 1, Mark: own.Mark, State: own.State}, nil)
		}},
	// Its own state and mark, byte for byte: only the signature is not
	// its own (the controller signs no snapshot, and takes none signed).
	{name: "signed by another key", reason: "it is signed, and this owner takes no signed snapshot",
		file: func(t *testing.T, _ *stack, own snapshot.Loaded) []byte {
			return snapshotFile(t, snapshot.Snapshot{Format: ledger.StateFormat, Version: ledger.StateVersion, Mark: own.Mark, State: own.State}, anotherKey(t))
		}},
}

// TestForeignSnapshotRefused: a snapshot that is not this controller's
// (another controller's journal, another daemon's format signed by a key,
// another version of its state, its own state signed by another key),
// planted in place of its newest own one, is refused by name and with its
// reason, in the daemon's log and by the read-only opens
// (`steward-controller attempts list`, the installer's ledger.OpenReadOnly)
// alike; the next older own snapshot is used, or, with none, a full
// replay; and nothing is lost: the ledger is a whole replay's, every
// requestId answered before replays byte for byte, and the index ends as
// a whole replay's.
func TestForeignSnapshotRefused(t *testing.T) {
	s := newStack(t, stackOpts{funded: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	w := newWatch()
	w.start(s, 2) // a call is two records: one is due after each
	cs := s.client(ctx)
	answers := map[string]string{} // requestId -> its answer's text
	for i := range 6 {
		id := fmt.Sprintf("own-%d", i)
		rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id}))
		_, answers[id] = rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id})) // as replayed
		// A snapshot between the calls, and one at the stop.
		if i == 2 {
			w.snapshotPast(t, ctx, s.lastSeq())
		}
	}
	s.stopController()
	snaps := ledger.SnapshotDir(s.cfg.JournalDir())
	for _, c := range foreignCases {
		for _, older := range []bool{true, false} {
			what := "the next older own snapshot"
			if !older {
				what = "a full replay"
			}
			t.Run(c.name+", then "+what, func(t *testing.T) {
				foreignRun(t, ctx, s, w, snaps, c, older, answers)
			})
		}
	}
	sameIndexAsFullReplay(t, s)
}

// foreignRun plants c's file in place of the newest own snapshot (with
// every other own one moved aside unless older), starts the controller
// and checks what TestForeignSnapshotRefused says; it leaves the
// directory with own snapshots only.
func foreignRun(t *testing.T, ctx context.Context, s *stack, w *watch, snaps string, c foreignCase, older bool, answers map[string]string) {
	own, err := snapshot.Load(snaps, ledger.StateFormat, nil, nil)
	if err != nil || len(own.Rejected) != 0 {
		t.Fatalf("the newest own snapshot: %v, rejected %+v", err, own.Rejected)
	}
	names := snapshotNames(t, snaps)
	if len(names) < 2 || names[len(names)-1] != own.Name {
		t.Fatalf("own snapshots %v; want two or more, the newest %s", names, own.Name)
	}
	foreign := c.file(t, s, own)
	want, aside := names[len(names)-2], t.TempDir()
	logs := &logLines{}
	defer restore(t, s, snaps, own.Name, foreign, aside)
	if !older {
		want = ""
	} else {
		names = names[len(names)-1:]
	}
	for _, n := range names { // the own snapshots the open must not find
		if err := os.Rename(filepath.Join(snaps, n), filepath.Join(aside, n)); err != nil {
			t.Fatal(err)
		}
	}
	plant(t, filepath.Join(snaps, own.Name), foreign)

	s.startControllerWith(Options{SnapshotEvery: history.DefaultEvery, hooks: w.hooks(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	op := <-w.opened
	refusedOnce(t, "the daemon", op.Rejected, own.Name, c.reason)
	if c.is != nil && !errors.Is(op.Rejected[0].Err, c.is) {
		t.Fatalf("the daemon's refusal %v is not %v", op.Rejected[0].Err, c.is)
	}
	if op.Snapshot != want {
		t.Fatalf("the daemon opened from %q, want %q", op.Snapshot, want)
	}
	if _, ok := logs.find("controller history: snapshot refused", "snapshot="+own.Name); !ok {
		t.Fatalf("the daemon's log names no refused %s:\n%s", own.Name, strings.Join(logs.lines, "\n"))
	}
	t.Logf("%s: %s", op.Rejected[0].Name, op.Rejected[0].Reason)
	if b, err := os.ReadFile(filepath.Join(snaps, own.Name)); err != nil || !bytes.Equal(b, foreign) {
		t.Fatalf("the refused file is not left as it was: %v", err)
	}
	sameAsFullReplay(t, s, op)
	cs := s.client(ctx)
	for id, text := range answers {
		if _, got := rawCall(t, ctx, cs, callArgs(id, map[string]any{"text": id})); got != text {
			t.Fatalf("requestId %s replays\n%s\nwant\n%s", id, got, text)
		}
	}
	readOnlyRefuses(t, s, own.Name, want, c.reason)
}

// restore stops the controller and leaves snaps with own snapshots
// only: the planted file goes (a refused file is left where it is, and
// the keeper's snapshot at its seq, at the stop, is not written: it
// finds the name taken), and the own files moved aside come back where
// the keeper wrote none.
func restore(t *testing.T, s *stack, snaps, name string, foreign []byte, aside string) {
	s.stopController()
	if b, err := os.ReadFile(filepath.Join(snaps, name)); err == nil && bytes.Equal(b, foreign) {
		if err := os.Remove(filepath.Join(snaps, name)); err != nil {
			t.Fatal(err)
		}
	}
	des, err := os.ReadDir(aside)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if _, err := os.Lstat(filepath.Join(snaps, de.Name())); err == nil {
			continue // the keeper wrote its own there since
		}
		if err := os.Rename(filepath.Join(aside, de.Name()), filepath.Join(snaps, de.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// readOnlyRefuses runs the read-only opens against the running daemon:
// `steward-controller attempts list` (its log on stderr names the refused
// snapshot) and the installer's ledger.OpenReadOnly, which must refuse
// name with reason and start from want ("" for a full replay).
func readOnlyRefuses(t *testing.T, s *stack, name, want, reason string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(controllerBin(t), "attempts", "list", "--config", s.cfgPath, "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("steward-controller attempts list: %v\n%s", err, stderr.String())
	}
	var list []Attempt
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatalf("attempts list --json: %v: %s", err, stdout.String())
	}
	if !hasAll(stderr.String(), []string{"controller history: snapshot refused", "snapshot=" + name}) {
		t.Fatalf("attempts list's log names no refused %s:\n%s", name, stderr.String())
	}
	ro, err := ledger.OpenReadOnly(s.cfg.JournalDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Journal.Close()
	refusedOnce(t, "ledger.OpenReadOnly", ro.Rejected, name, reason)
	if ro.Snapshot != want {
		t.Fatalf("ledger.OpenReadOnly opened from %q, want %q", ro.Snapshot, want)
	}
}

// refusedOnce fails unless rejected is exactly name, for reason.
func refusedOnce(t *testing.T, who string, rejected []snapshot.Rejected, name, reason string) {
	t.Helper()
	if len(rejected) != 1 || rejected[0].Name != name || !strings.Contains(rejected[0].Reason, reason) {
		t.Fatalf("%s rejected %+v; want only %s, for %q", who, rejected, name, reason)
	}
}

// snapshotNames are the snapshot files in dir, oldest first.
func snapshotNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".snap") && !strings.HasPrefix(de.Name(), ".") {
			out = append(out, de.Name())
		}
	}
	return out
}

// plant writes b at path through a temporary and a rename, as a
// snapshot's writer would.
func plant(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".planted"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
