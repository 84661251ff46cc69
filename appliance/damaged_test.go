package appliance

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/journal/index"
)

// startLogged starts an appliance on state, its logs in the buffer
// returned.
func startLogged(t *testing.T, state string) (*app, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	return startApp(t, Config{State: state, Logger: slog.New(slog.NewTextHandler(logs, nil))}), logs
}

// rebuilt checks that the start was a full replay that rebuilt the index,
// that the damaged file (and marker) were set aside under the names
// given, holding what they held, and that the oldest call answers as
// before.
func rebuilt(t *testing.T, a *app, logs *bytes.Buffer, aside map[string][]byte, oldest []byte) {
	t.Helper()
	if !strings.Contains(logs.String(), `level=ERROR msg="the history index is damaged; setting it aside and rebuilding it from the journal"`) {
		t.Fatalf("no report of the damage:\n%s", logs)
	}
	for name, want := range aside {
		got, err := os.ReadFile(filepath.Join(filepath.Dir(indexPath(a.state)), name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("set aside as %s: %d bytes, %v; want the %d bytes it held", name, len(got), err, len(want))
		}
	}
	st := a.srv.store
	sameAsFull(t, a.state, st.opened, st.x)
	if status, body := a.invokeBody(callBody(0)); status != 200 || !bytes.Equal(body, oldest) {
		t.Fatalf("oldest call after the rebuild: %d %s, first %s", status, body, oldest)
	}
}

// A damaged index is reported, set aside (never deleted: a second one
// goes beside the first) and rebuilt by a full replay: a file bbolt
// refuses, one written without fsync before the machine restarted (its
// marker of another boot), and one built from another journal.
func TestDamagedIndexIsRebuilt(t *testing.T) {
	state := generatedState(t, 10)
	a := startApp(t, Config{State: state})
	_, oldest := a.invokeBody(callBody(0))
	a.close()
	path := indexPath(state)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// bbolt's meta pages overwritten.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xee}, 8192), 0)
	f.Close()
	damaged := read(path)
	a, logs := startLogged(t, state)
	rebuilt(t, a, logs, map[string][]byte{"answers.db.damaged": damaged}, oldest)
	a.close()

	// A marker of another boot: the file and its marker, aside.
	marker := []byte("00000000-0000-0000-0000-000000000000\n")
	if err := os.WriteFile(path+index.MarkerSuffix, marker, 0o600); err != nil {
		t.Fatal(err)
	}
	unsynced := read(path)
	a, logs = startLogged(t, state)
	rebuilt(t, a, logs, map[string][]byte{"answers.db.2.damaged": unsynced, "answers.db.unsynced.damaged": marker,
		"answers.db.damaged": damaged}, oldest)
	a.close()

	// Another appliance's index, whose marks cover ours.
	other := generatedState(t, 20)
	theirs := read(indexPath(other))
	if err := os.Rename(indexPath(other), path); err != nil {
		t.Fatal(err)
	}
	a, logs = startLogged(t, state)
	if !strings.Contains(logs.String(), "it was built from another journal") {
		t.Fatalf("no report of another journal's index:\n%s", logs)
	}
	rebuilt(t, a, logs, map[string][]byte{"answers.db.3.damaged": theirs}, oldest)
}

// TestDamagedIndexWhileServing: an entry the journal does not bear out
// (its place another record's) is found by the repeat that reads it: the
// call is a fault and nothing runs, the server stops with the damage
// named, the index is set aside, and the restart rebuilds it.
func TestDamagedIndexWhileServing(t *testing.T) {
	state := generatedState(t, 10)
	a := startApp(t, Config{State: state})
	// Call 1's entry names call 0's record: the index, not the journal,
	// is wrong.
	x := a.srv.store.x
	e0, e1 := indexEntryOf(t, x, callBody(0).RequestID), indexEntryOf(t, x, callBody(1).RequestID)
	e1.place = e0.place
	if err := x.Put(answersBucket, []byte(callBody(1).RequestID), encodeEntry(e1)); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.srv.serveUntil(context.Background()) }()
	status, body := a.invokeBody(callBody(1))
	if e := errorOf(t, body); status != 500 || e.Message != "the recorded answers could not be read" {
		t.Fatalf("a repeat the index misplaces: %d %s", status, body)
	}
	var err error
	select {
	case err = <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop on a damaged index")
	}
	want := fmt.Sprintf(`appliance history index damaged (index: %s is damaged: requestId "%s": its place is record %d, the answer to requestId "%s"; remove it and rebuild it from the journal); it was set aside, and a restart rebuilds it from the journal`,
		indexPath(state), callBody(1).RequestID, e0.place.Seq, callBody(0).RequestID)
	if err == nil || err.Error() != want {
		t.Fatalf("Serve: %v\nwant %s", err, want)
	}
	if _, err := os.Stat(indexPath(state) + ".damaged"); err != nil {
		t.Fatal(err)
	}
	b := startApp(t, Config{State: state})
	sameAsFull(t, state, b.srv.store.opened, b.srv.store.x)
}

// indexEntryOf is id's entry in x.
func indexEntryOf(t *testing.T, x *index.Index, id string) entry {
	t.Helper()
	v, ok, err := x.Get(answersBucket, []byte(id))
	if err != nil || !ok {
		t.Fatalf("no entry of %s: %v", id, err)
	}
	e, err := decodeEntry(v)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
