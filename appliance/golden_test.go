package appliance

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/journaltest"
)

// TestGoldenApplianceJournal: each version of the golden appliance journal (the two
// calls of two dev runs, each answered once) replays into the ledger,
// which would answer a repeat of either from the journal.
func TestGoldenApplianceJournal(t *testing.T) {
	for _, v := range journaltest.Versions(t) {
		t.Run(v, func(t *testing.T) { checkGoldenAppliance(t, v) })
	}
}

func checkGoldenAppliance(t *testing.T, version string) {
	dir := filepath.Join(journaltest.CopyGolden(t, version, "appliance"), "journal")
	j, err := journal.Open(dir, journal.Options{Owner: journalOwner, Format: journalFormat, Config: journalConfig, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l, err := openLedger(j)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if len(l.answers) != 2 {
		t.Fatalf("%d answers, want 2", len(l.answers))
	}
	for id, a := range l.answers {
		if a.status != 200 || len(a.response) == 0 {
			t.Errorf("answer for %s: status %d, %d response bytes", id, a.status, len(a.response))
		}
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
