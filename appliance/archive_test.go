package appliance

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/snapshot"
)

// archiveSegmentSize makes the archive tests' journals a few segments
// long after 60 calls.
const archiveSegmentSize = 4096

// archiveCalls is how many calls the archive tests record.
const archiveCalls = 60

// recordedState records archiveCalls calls, one at a time (call i is
// record i+2, after the bind record), in small segments, stops cleanly
// (a snapshot at the last record) and returns the state directory and
// each call's answer.
func recordedState(t *testing.T) (string, map[int][]byte) {
	t.Helper()
	a := startApp(t, Config{JournalSegmentSize: archiveSegmentSize})
	answers := map[int][]byte{}
	for i := range archiveCalls {
		genCall(t, a.srv, i)
		_, answers[i] = a.invokeBody(callBody(i)) // a replay: nothing journaled
	}
	if n := a.records(); n != archiveCalls+1 {
		t.Fatalf("%d records, want %d", n, archiveCalls+1)
	}
	a.close()
	return a.state, answers
}

// runMain runs the command in this process.
func runMain(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

// tree is every file under the roots: its mode, size and SHA-256, so
// that a refusal can be shown to have changed nothing.
func tree(t *testing.T, roots ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && p == root {
					out[p] = "absent"
					return nil
				}
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			v := fi.Mode().String()
			if fi.Mode().IsRegular() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				v += fmt.Sprintf(" %d %x", len(b), sha256.Sum256(b))
			}
			out[p] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// archivedWant is the exact answer to call i once its answer is archived
// in name.
func archivedWant(i int, name string) string {
	id := callBody(i).RequestID
	return fmt.Sprintf(`{"error":{"code":"archived","details":{"archive":%q,"requestId":%q},"message":"request \"%s\" is archived in %s"}}`,
		name, id, id, name)
}

// checkArchived checks the appliance a after an archive of records 1 to
// last in name: every call whose record is archived is refused 409 with
// the exact answer, running nothing and journaling nothing, and so is a
// call with its id and another body (a conflict); every other call
// replays its answer byte for byte.
func checkArchived(t *testing.T, a *app, answers map[int][]byte, last uint64, name string) {
	t.Helper()
	var ran atomic.Int32
	testHookRunning = func(string) { ran.Add(1) }
	defer func() { testHookRunning = nil }()
	n, archived := a.records(), 0
	for i := range archiveCalls {
		status, body := a.invokeBody(callBody(i))
		if uint64(i+2) > last {
			if status >= 500 || !bytes.Equal(body, answers[i]) {
				t.Fatalf("call %d (record %d, kept): %d %s, first answered %s", i, i+2, status, body, answers[i])
			}
			continue
		}
		archived++
		if status != 409 || string(body) != archivedWant(i, name) {
			t.Fatalf("call %d (record %d, archived): %d %s\nwant 409 %s", i, i+2, status, body, archivedWant(i, name))
		}
		other := callBody(i)
		other.ConversationID = "another"
		if status, body := a.invokeBody(other); status != 409 || errorOf(t, body).Code != codeConflict {
			t.Fatalf("call %d with another body: %d %s", i, status, body)
		}
	}
	if archived == 0 || archived == archiveCalls {
		t.Fatalf("%d of %d calls archived: the test archives some, not all", archived, archiveCalls)
	}
	if ran.Load() != 0 || a.records() != n {
		t.Fatalf("after the archive: %d operations ran, records %d -> %d", ran.Load(), n, a.records())
	}
}

// baseOf is the journal base of a stopped appliance's state.
func baseOf(t *testing.T, state string) journal.Base {
	t.Helper()
	j, err := journal.Open(journalDir(state), journal.Options{ReadOnly: true, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	b, ok := j.Base()
	if !ok || len(b.Archives) != 1 || len(b.Leftover) != 0 {
		t.Fatalf("base %+v, %v: want one archive, no leftovers", b, ok)
	}
	return b
}

// The archive moves the segments before the snapshot of the clean stop
// out; the appliance started again (and again) refuses the archived
// calls by name, replays the others and the new ones byte for byte, and
// inspect says where the records are.
func TestHistoryArchive(t *testing.T) {
	state, answers := recordedState(t)
	to := filepath.Join(shortDir(t), "answers-0001")
	code, out, errs := runMain("history", "archive", "--state", state, "--to", to)
	b := baseOf(t, state)
	want := fmt.Sprintf("archived journal records 1..%d (%d segments) in %s, before the snapshot at record %d\n",
		b.Seq, len(liveSegs(t, to)), to, archiveCalls+1)
	if code != 0 || out != want || errs != "" {
		t.Fatalf("archive: exit %d\nstdout: %s\nstderr: %s\nwant: %s", code, out, errs, want)
	}
	if b.Archives[0].Name != "answers-0001" || b.Archives[0].Dir != to {
		t.Fatalf("base %+v", b)
	}

	a := startApp(t, Config{State: state})
	checkArchived(t, a, answers, b.Seq, "answers-0001")
	status, after := a.invoke("after-1", "text.sha256", `{"text":"after the archive"}`)
	if status != 200 {
		t.Fatalf("a new call: %d %s", status, after)
	}
	a.close()

	a = startApp(t, Config{State: state})
	checkArchived(t, a, answers, b.Seq, "answers-0001")
	if status, again := a.invoke("after-1", "text.sha256", `{"text":"after the archive"}`); status != 200 || !bytes.Equal(again, after) {
		t.Fatalf("the new call after a restart: %d %s, first %s", status, again, after)
	}
	a.close()

	code, out, errs = runMain("inspect", "--state", state)
	line := fmt.Sprintf("archived records 1..%d in answers-0001 (%s)\n", b.Seq, to)
	if code != 0 || !strings.Contains(out, line) || !strings.Contains(out, fmt.Sprintf("answers %d\n", archiveCalls+1)) {
		t.Fatalf("inspect: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// liveSegs lists the segment files of a journal or archive directory.
func liveSegs(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".seg") {
			out = append(out, e.Name())
		}
	}
	return out
}

// history snapshot writes one only when something was recorded since
// the last: after a kill, the records the appliance answered since its
// last snapshot; after a clean stop, none.
func TestHistorySnapshot(t *testing.T) {
	dir := shortDir(t)
	sock, state := filepath.Join(dir, "a.sock"), filepath.Join(dir, "state")
	c := startChild(t, sock, state)
	childCalls(t, sock, 0, 5)
	c.cmd.Process.Kill()
	c.cmd.Wait()
	code, out, errs := runMain("history", "snapshot", "--state", state)
	if want := fmt.Sprintf("snapshot %s (record 6)\n", snapshot.Name(6)); code != 0 || out != want || errs != "" {
		t.Fatalf("snapshot after a kill: exit %d\nstdout: %s\nstderr: %s\nwant %s", code, out, errs, want)
	}
	before := tree(t, state)
	code, out, errs = runMain("history", "snapshot", "--state", state)
	if want := "nothing recorded since the last snapshot (record 6): none written\n"; code != 0 || out != want || errs != "" {
		t.Fatalf("snapshot again: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if after := tree(t, state); !reflect.DeepEqual(before, after) {
		t.Fatalf("a snapshot with nothing to write changed the state:\n%v\n%v", before, after)
	}
}

// After an archive, the index and the snapshots lost: a start rebuilds
// both from the archive (where it was made) and the live journal, as a
// full replay before any archive would, and the archived calls are still
// refused by name, the others replayed. With the archive gone too, the
// start fails naming it, and changes nothing.
func TestHistoryArchiveRebuild(t *testing.T) {
	state, answers := recordedState(t)
	to := filepath.Join(shortDir(t), "answers-0001")
	if code, _, errs := runMain("history", "archive", "--state", state, "--to", to); code != 0 {
		t.Fatalf("archive: exit %d: %s", code, errs)
	}
	b := baseOf(t, state)
	lose := func() {
		t.Helper()
		for _, p := range []string{filepath.Dir(indexPath(state)), snapshotDir(state)} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	lose()
	a := startApp(t, Config{State: state})
	checkArchived(t, a, answers, b.Seq, "answers-0001")
	a.close()

	lose()
	if err := os.Rename(to, to+".moved"); err != nil {
		t.Fatal(err)
	}
	before := tree(t, journalDir(state))
	_, err := Start(Config{State: state, Socket: filepath.Join(shortDir(t), "a.sock"), Logger: quietLogger(t)})
	want := fmt.Sprintf("records 1 to %d are archived in answers-0001, which does not open, and a replay from record 1 needs them", b.Seq)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start with the archive moved: %v, want %q", err, want)
	}
	if after := tree(t, journalDir(state)); !reflect.DeepEqual(before, after) {
		t.Fatal("the failed start changed the journal")
	}
}
