package ledger

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestGoldenControllerJournal: each version of the golden controller journal (two runs
// of the dev stack: per run a discovery and a call, each begun and ended
// with a definite result) replays into the ledger with no attempt left
// open, and every result's receipt verifies under the host key of the
// golden host journal it was answered from.
func TestGoldenControllerJournal(t *testing.T) {
	for _, v := range journaltest.Versions(t) {
		t.Run(v, func(t *testing.T) { checkGoldenController(t, v) })
	}
}

func checkGoldenController(t *testing.T, version string) {
	dir := filepath.Join(journaltest.CopyGolden(t, version, "controller"), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l := New()
	if err := l.Replay(j); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if len(l.open) != 0 || len(l.UncertainAttempts()) != 0 {
		t.Errorf("open attempts after replay: %d (uncertain %+v)", len(l.open), l.UncertainAttempts())
	}
	calls := 0
	for k, q := range l.byReq {
		calls++
		if k.application != "appliance" || q.state != msg.StateDefinite || q.answer.Seq == 0 {
			t.Errorf("request %+v: %+v", k, q)
		}
	}
	if calls != 2 {
		t.Errorf("%d requestIds in the ledger, want the two calls", calls)
	}

	pub, err := os.ReadFile(filepath.Join(journaltest.GoldenDir(t, version, "host"), "operator.pub"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := wire.ParseHybridPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	ring := wire.NewKeyring(host.Ed25519())
	results := 0
	err = j.Iterate(1, func(r journal.Record) error {
		if r.Kind != KindResult {
			return nil
		}
		var res Result
		if err := Decode(r, &res); err != nil {
			return err
		}
		results++
		if res.Outcome != msg.StateDefinite || res.Status != 200 {
			t.Errorf("result %d: outcome %q status %d", r.Seq, res.Outcome, res.Status)
		}
		if _, err := msg.VerifyReceipt(res.Receipt, ring); err != nil {
			t.Errorf("result %d: %v", r.Seq, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if results != 4 {
		t.Errorf("%d results, want 4", results)
	}
}
