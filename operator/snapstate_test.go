package operator

import (
	"reflect"
	"testing"

	"github.com/stewardrt/steward/journal/journaltest"
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
