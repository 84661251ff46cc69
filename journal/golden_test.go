package journal_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/journaltest"
)

// goldenVersions are the committed versions of the golden journals, and
// the segment size their bind records record (0: none, v1 predates it).
var goldenVersions = []struct {
	version  string
	recorded int64
}{
	{"v1", 0},
	{"v2", 4 << 20},
}

// goldenJournal is one journal of a golden version.
type goldenJournal struct {
	part, dir     string // journaltest part and the journal inside it
	owner, format string
	kinds         string
}

// goldenJournals is what each golden journal holds (the same two dev runs
// in every version): who wrote it and
// its records' kinds, in order. The owners' own tests (operator,
// controller, appliance) replay and verify the records' meaning.
var goldenJournals = []goldenJournal{
	{"host", "journal", "steward-operator", "steward-host-journal-v1",
		"bind controller-add purse-fund grant-issue route-register" + strings.Repeat(" reserve outcome checkpoint", 4)},
	{"controller", "journal", "steward-controller", "steward-controller-journal-v1",
		"bind" + strings.Repeat(" begin result", 4)},
	{"appliance", "journal", "steward-appliance", "steward-appliance-journal-v1",
		"bind answer answer"},
}

// forEachGolden runs fn on every golden journal of every version.
func forEachGolden(t *testing.T, fn func(t *testing.T, version string, recorded int64, dir string, g goldenJournal)) {
	for _, v := range goldenVersions {
		for _, g := range goldenJournals {
			t.Run(v.version+"/"+g.part, func(t *testing.T) {
				fn(t, v.version, v.recorded, filepath.Join(journaltest.CopyGolden(t, v.version, g.part), g.dir), g)
			})
		}
	}
}

// TestGoldenJournalsOpen: the golden journals, each a segment cut to its
// records, open read-only as they are, with the owner and format their
// bind record names and every record verified (frame, CRC, strict
// decoding, sequence, hash chain).
func TestGoldenJournalsOpen(t *testing.T) {
	forEachGolden(t, func(t *testing.T, version string, recorded int64, dir string, g goldenJournal) {
		j, err := journal.Open(dir, journal.Options{Owner: g.owner, Format: g.format, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		var kinds []string
		if err := j.Iterate(1, func(r journal.Record) error {
			kinds = append(kinds, r.Kind)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(kinds, " "); got != g.kinds {
			t.Errorf("kinds:\n got %s\nwant %s", got, g.kinds)
		}
		if n := uint64(len(kinds)); j.LastSeq() != n {
			t.Errorf("LastSeq = %d, want %d", j.LastSeq(), n)
		}
		if rs := j.Recoveries(); len(rs) != 0 {
			t.Errorf("recoveries: %+v", rs)
		}
		if recorded != 0 && j.SegmentSize() != recorded {
			t.Errorf("%s: SegmentSize = %d, want the recorded %d", version, j.SegmentSize(), recorded)
		}
		// Written when the journal canonicalized its config itself, the
		// bound config is canonical JSON: what the owners now pass.
		if c, err := canonjson.CanonicalJSON(j.Config()); err != nil || !bytes.Equal(c, j.Config()) {
			t.Errorf("config %s is not canonical JSON (%s, %v)", j.Config(), c, err)
		}
	})
}

// TestGoldenJournalsAppend: opened for writing (with the config its bind
// record holds), a golden journal takes its short segment as the last one,
// preallocates it again to its segment size (the recorded one, else the
// option's) and continues the chain; the next open finds the old records
// and the new one.
func TestGoldenJournalsAppend(t *testing.T) {
	forEachGolden(t, func(t *testing.T, version string, recorded int64, dir string, g goldenJournal) {
		ro, err := journal.Open(dir, journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		cfg, last, head := ro.Config(), ro.LastSeq(), ro.Head()
		ro.Close()
		opts := journal.Options{Owner: g.owner, Format: g.format, Config: cfg, SegmentSize: 1 << 20}
		j, err := journal.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := recorded
		if want == 0 {
			want = opts.SegmentSize // v1 records none: the option's holds
		}
		if j.SegmentSize() != want {
			t.Errorf("SegmentSize = %d, want %d", j.SegmentSize(), want)
		}
		if s := j.Summary().Segments; len(s) != 1 || s[0].Size != want {
			t.Errorf("segments after a read-write open: %+v", s)
		}
		seq, err := j.Append("golden-test", map[string]string{"after": version})
		if err != nil || seq != last+1 {
			t.Fatalf("Append = %d, %v; want seq %d", seq, err, last+1)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j, err = journal.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if j.LastSeq() != last+1 {
			t.Errorf("LastSeq after reopen = %d, want %d", j.LastSeq(), last+1)
		}
		var prev []byte
		if err := j.Iterate(last+1, func(r journal.Record) error { prev = r.Prev; return nil }); err != nil {
			t.Fatal(err)
		}
		if string(prev) != string(head[:]) {
			t.Errorf("the new record's prev %x is not the golden head %x", prev, head)
		}
	})
}

// Every committed version is in goldenVersions: a new one is not left out
// of the journal's own checks.
func TestGoldenVersionsListed(t *testing.T) {
	var listed []string
	for _, v := range goldenVersions {
		listed = append(listed, v.version)
	}
	if got, want := strings.Join(journaltest.Versions(t), " "), strings.Join(listed, " "); got != want {
		t.Fatalf("committed golden versions %q, goldenVersions lists %q", got, want)
	}
}
