package journal

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A replay from record 1 with ReplayArchives goes through the archives
// the base names, oldest first, then the live log: OnRecord is handed
// exactly the records, places and payloads of the log as it was before
// any archive, read read-write and read-only alike. An archive that is not
// where it was made, or not the one the base names, fails the Open
// naming it, and nothing is handed past it as if whole.
func TestReplayArchives(t *testing.T) {
	dir, opts, marks := markedLog(t)
	j := mustOpen(t, dir, opts)
	all := collect(t, j, 1)
	root := t.TempDir()
	a1, a2 := filepath.Join(root, "a1"), filepath.Join(root, "a2")
	mustArchive(t, j, a1, marks[10])
	mustArchive(t, j, a2, marks[33])
	mustClose(t, j)
	replay := func(readOnly bool) ([]Record, error) {
		o := opts
		o.ReadOnly, o.ReplayArchives = readOnly, true
		var got []Record
		o.OnRecord = func(r Record) error { got = append(got, r); return nil }
		j, err := Open(dir, o)
		if err == nil {
			mustClose(t, j)
		}
		return got, err
	}
	for _, ro := range []bool{false, true} {
		got, err := replay(ro)
		if err != nil {
			t.Fatalf("replay (read-only %v): %v", ro, err)
		}
		if len(got) != len(all) {
			t.Fatalf("replay (read-only %v): %d records, want %d", ro, len(got), len(all))
		}
		for i := range all {
			if got[i].Seq != all[i].Seq || got[i].Kind != all[i].Kind || !reflect.DeepEqual(got[i].Body, all[i].Body) {
				t.Fatalf("replay (read-only %v): record %d is %d %s, want %d %s", ro, i, got[i].Seq, got[i].Kind, all[i].Seq, all[i].Kind)
			}
		}
	}

	// An archive moved away: the Open fails naming it.
	moved := filepath.Join(root, "moved")
	if err := os.Rename(a2, moved); err != nil {
		t.Fatal(err)
	}
	_, err := replay(false)
	if err == nil || !strings.HasPrefix(err.Error(), "journal: "+dir+": records 9 to 30 are archived in a2, which does not open, and a replay from record 1 needs them: ") {
		t.Fatalf("replay with a2 moved: %v", err)
	}
	// Another archive in its place (a copy of the first): refused by the
	// base's digest of its manifest.
	if err := os.CopyFS(a2, os.DirFS(a1)); err != nil {
		t.Fatal(err)
	}
	_, err = replay(false)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != a2 || !strings.HasPrefix(ce.Reason, "the archive is not the a2 the base names: its manifest's digest is ") {
		t.Fatalf("replay with another archive as a2: %v", err)
	}
	// Without ReplayArchives the replay is refused as before.
	o := opts
	o.OnRecord = func(Record) error { return nil }
	if _, err := Open(dir, o); !errors.Is(err, ErrArchived) {
		t.Fatalf("a replay without ReplayArchives: %v", err)
	}
}
