package host

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestInspectRefusalNamesNoPath: an inspect whose outcome the host journal
// cannot give back (the journal is closed under it) is refused with a text
// that names the failure and no path of the host's; the log has the error.
// Before, the refusal carried the journal's error text, which names its
// directory.
func TestInspectRefusalNamesNoPath(t *testing.T) {
	dir := ShortDir(t)
	store := filepath.Join(dir, "store")
	if _, err := Init(store); err != nil {
		t.Fatal(err)
	}
	s, err := Open(store)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	h := &Host{s: s, log: slog.New(slog.NewTextHandler(&log, nil))}
	// A definite attempt whose outcome record is at seq 1: Inspect reads it
	// from the journal, which is closed now.
	s.st.attempts["a1"] = &attempt{id: "a1", controller: "dev", state: msg.StateDefinite, outcomeSeq: 1}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	body, err := wire.Marshal(msg.Inspect{Attempt: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	typ, rep := h.routeHandler(&routeListener{route: "r1", controller: "dev"}).ServeFrame(context.Background(), &wire.Envelope{T: msg.TypeInspect, Body: body})
	ref, ok := rep.(msg.Refusal)
	if typ != msg.TypeRefused || !ok || ref.Code != msg.CodeJournal || ref.Reason != inspectUnreadable {
		t.Fatalf("inspect answered %s %+v, want refused %s %q", typ, rep, msg.CodeJournal, inspectUnreadable)
	}
	if strings.Contains(ref.Reason, dir) {
		t.Fatalf("the refusal names a host path: %q", ref.Reason)
	}
	// A closed journal's error names no path itself; what the test
	// shows is that the refusal is the fixed text whatever the error, and
	// that the error goes to the log.
	if !strings.Contains(log.String(), `err="journal: closed"`) {
		t.Fatalf("the log lacks the journal's error:\n%s", log.String())
	}
}
