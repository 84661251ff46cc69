package ledger

import (
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

var updateRecords = flag.Bool("update-records", false, "rewrite testdata/records.golden (only for a record added, never one changed)")

// goldenRecords are the approvals' records as this code writes them: the
// bodies in testdata/records.golden, one "kind hex" line each. A body
// written by an older controller must keep decoding (strictly) to the
// same value, so a change here is a new kind, never an edit of a line.
var goldenRecords = []struct {
	kind string
	body any
}{
	{KindAwaiting, Awaiting{Attempt: "a-1", Ask: "ask-0123456789ab", ExpiresAt: 1_796_000_000_000}},
	{KindConsented, Consented{Attempt: "a-1", ConsentSHA256: make([]byte, 32), Amount: 5}},
	{KindBegin, Begin{Attempt: "a-1", Tool: "oracle_call", Application: "appliance", Operation: "op", RequestID: "r1", ConversationID: "c1",
		Kind: msg.KindInvoke, Method: "POST", Path: "/v1/invoke", Body: []byte(`{}`), RequestSHA256: make([]byte, 32), Route: "appliance",
		Principal: "agent1", Agent: "agent1", Day: 20_423, Deadline: 1_796_000_000_000, ScopedRequestID: "s1", Justification: "refund the double charge"}},
	{KindResult, Result{Attempt: "a-1", Outcome: msg.StateDefinite, Status: 200, Body: []byte(`{}`), Receipt: []byte{1}, Charge: 1, Consented: 5,
		Ask: "ask-0123456789ab", AnsweredBy: "uid:1001"}},
}

// TestGoldenRecords: each record's body encodes to its golden bytes, and
// the golden bytes decode strictly (as Replay reads them) to the same
// value.
func TestGoldenRecords(t *testing.T) {
	path := filepath.Join("testdata", "records.golden")
	var lines []string
	for _, g := range goldenRecords {
		b, err := wire.Marshal(g.body)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, g.kind+" "+hex.EncodeToString(b))
	}
	if *updateRecords {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(golden) != len(goldenRecords) {
		t.Fatalf("%d golden records, want %d", len(golden), len(goldenRecords))
	}
	for i, g := range goldenRecords {
		if golden[i] != lines[i] {
			t.Errorf("%s encodes as\n%s\nthe golden is\n%s", g.kind, lines[i], golden[i])
		}
		kind, h, _ := strings.Cut(golden[i], " ")
		body, err := hex.DecodeString(h)
		if err != nil || kind != g.kind {
			t.Fatalf("golden line %d: kind %q, %v", i+1, kind, err)
		}
		got := reflect.New(reflect.TypeOf(g.body))
		if err := Decode(journal.Record{Seq: uint64(i + 1), Kind: kind, Body: body}, got.Interface()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Elem().Interface(), g.body) {
			t.Errorf("%s decodes to %+v, want %+v", kind, got.Elem().Interface(), g.body)
		}
	}
}
