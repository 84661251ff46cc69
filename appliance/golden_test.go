package appliance

import (
	"bytes"
	"testing"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/journal/snapshot"
)

// TestGoldenApplianceJournal: each version of the golden appliance
// journal (the two calls of two dev runs, each answered once) opens by a
// full replay, and again from the snapshot the first stop made, each time
// the state and index a full replay gives; both answers are then read
// from the index and the journal byte for byte as recorded.
func TestGoldenApplianceJournal(t *testing.T) {
	for _, v := range journaltest.Versions(t) {
		t.Run(v, func(t *testing.T) { checkGoldenAppliance(t, v) })
	}
}

func checkGoldenAppliance(t *testing.T, version string) {
	state := journaltest.CopyGolden(t, version, "appliance")
	full := fullReplay(t, state)
	if full.Answers != 2 || len(full.all) != 2 {
		t.Fatalf("%d answers (%d ids), want 2", full.Answers, len(full.all))
	}
	for pass, want := range []string{"", snapshot.Name(full.Seq)} {
		a := startApp(t, Config{State: state})
		op := a.srv.store.opened
		if got := a.srv.store.k; got == nil || op.Seq != full.Seq {
			t.Fatalf("pass %d: opened at seq %d, want %d", pass, op.Seq, full.Seq)
		}
		if name := snapshotNames(t, state); pass == 1 && (len(name) != 1 || name[0] != want) {
			t.Fatalf("pass %d: snapshots %v, want %s", pass, name, want)
		}
		sameAsFull(t, state, op, a.srv.store.x)
		for id, e := range full.all {
			r, err := a.srv.journal.ReadAt(e.place)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := decodeAnswer(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.srv.ledger.recorded(id)
			if err != nil || got == nil || got.status != rec.Status || !bytes.Equal(got.response, rec.Response) || got.status != 200 {
				t.Fatalf("pass %d: the answer to %s: %+v %v, recorded %d %s", pass, id, got, err, rec.Status, rec.Response)
			}
		}
		a.close()
	}
}

// TestJournalConfigIsCanonical: the journal binds journalConfig as given,
// so it must be the canonical form the journal used to compute itself, or
// the golden journals (and every installed one) would no longer open.
func TestJournalConfigIsCanonical(t *testing.T) {
	c, err := canonjson.CanonicalJSON(journalConfig)
	if err != nil || !bytes.Equal(c, journalConfig) {
		t.Fatalf("journalConfig %s is not canonical (%s, %v)", journalConfig, c, err)
	}
}
