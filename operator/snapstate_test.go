package operator

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/journaltest"
	"github.com/stewardrt/steward/operator/hostlog"
)

// TestSnapshotIsReplay: a replayed state, encoded as a snapshot holds it
// and decoded, is that state again, field for field (the derived ones
// rebuilt, the ones only memory holds as a replay leaves them): over the
// golden host journals of every version.
func TestSnapshotIsReplay(t *testing.T) {
	for _, v := range journaltest.Versions(t) {
		t.Run(v, func(t *testing.T) {
			s, err := OpenReadOnly(journaltest.CopyGolden(t, v, "host"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			wantSameState(t, s.st)
		})
	}
}

// TestSnapshotOfEveryKind: the journal of testdata/allkinds (written by
// the host's TestAllKindsJournal) holds every record kind a host writes
// now, and its replayed state survives its snapshot encoding whole.
func TestSnapshotOfEveryKind(t *testing.T) {
	dir := journaltest.CopyDir(t, filepath.Join("testdata", "allkinds"))
	kinds := map[string]int{}
	j, _, err := hostlog.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = j.Iterate(1, func(r journal.Record) error { kinds[r.Kind]++; return nil })
	j.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range hostlog.KindNames() {
		if kinds[k] == 0 && !firstVersions[k] {
			t.Errorf("testdata/allkinds holds no %s record: run go test ./operator/host -run TestAllKindsJournal -update-allkinds", k)
		}
	}
	s, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantSameState(t, s.st)
}

// firstVersions are the record kinds only hosts before their second
// version wrote: the golden v1 journal holds them.
var firstVersions = map[string]bool{
	hostlog.KindControllerAdd: true, hostlog.KindRouteRegister: true, hostlog.KindReserve: true,
	hostlog.KindNotSent: true, hostlog.KindOutcome: true,
}

// wantSameState fails unless st survives its snapshot encoding whole.
func wantSameState(t *testing.T, st *state) {
	t.Helper()
	b, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := encodeState(got)
	if err != nil || string(again) != string(b) {
		t.Fatalf("the encoding of the decoded state differs (%v)", err)
	}
	got.askSignal, st.askSignal = nil, nil
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("decoded state differs:\n got %+v\nwant %+v", *got, *st)
	}
}

// TestSnapshotAtEveryMark: at every record of a journal, the state its
// records so far replay to, taken as a snapshot and then fed the records
// after it, is the state the whole journal replays to: over the golden
// journals of every version and testdata/allkinds, which holds every kind.
func TestSnapshotAtEveryMark(t *testing.T) {
	dirs := map[string]string{"allkinds": journaltest.CopyDir(t, filepath.Join("testdata", "allkinds"))}
	for _, v := range journaltest.Versions(t) {
		dirs[v] = journaltest.CopyGolden(t, v, "host")
	}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			s, err := OpenReadOnly(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var recs []journal.Record
			if err := s.j.Iterate(1, func(r journal.Record) error { recs = append(recs, r); return nil }); err != nil {
				t.Fatal(err)
			}
			whole := s.st
			prefix := &replayer{st: newState(), pub: s.pub}
			for m := range recs {
				if err := prefix.record(recs[m]); err != nil {
					t.Fatal(err)
				}
				b, err := encodeState(prefix.st)
				if err != nil {
					t.Fatal(err)
				}
				st, err := decodeState(b)
				if err != nil {
					t.Fatalf("after record %d: %v", m+1, err)
				}
				rest := &replayer{st: st, pub: s.pub}
				for _, r := range recs[m+1:] {
					if err := rest.record(r); err != nil {
						t.Fatalf("snapshot after record %d, then record %d: %v", m+1, r.Seq, err)
					}
				}
				st.SignedSeq, st.SignedHead = st.DurableSeq, st.DurableHead
				st.askSignal, whole.askSignal = nil, nil
				if !reflect.DeepEqual(st, whole) {
					t.Fatalf("snapshot after record %d, then the rest: the state differs from the whole replay's", m+1)
				}
			}
		})
	}
}
