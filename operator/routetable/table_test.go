package routetable

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestSnapshotNames: a Table embedded in a struct, as the operator's
// state embeds it, encodes its routes under the names the host's
// snapshots have always had (Routes, RouteOrder; a route's Name, Revs,
// State, By, At; a revision's Record, Signed, ID), flat, and nothing of
// its derived index.
func TestSnapshotNames(t *testing.T) {
	type holder struct{ Table }
	h := holder{New()}
	h.Add(msg.RouteRecord{Route: "r", Forward: "/run/f.sock"}, []byte("signed"), []byte("id"), StateMark{State: hostlog.RouteActive, By: "uid:1", At: 5})
	b, err := wire.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := wire.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got := keys(top); !slices.Equal(got, []string{"RouteOrder", "Routes"}) {
		t.Fatalf("table fields %q", got)
	}
	r := top["Routes"].(map[any]any)["r"].(map[any]any)
	if got := keys(r); !slices.Equal(got, []string{"At", "By", "Name", "Revs", "State"}) {
		t.Fatalf("route fields %q", got)
	}
	rv := r["Revs"].([]any)[0].(map[any]any)
	if got := keys(rv); !slices.Equal(got, []string{"ID", "Record", "Signed"}) {
		t.Fatalf("revision fields %q", got)
	}
	var back holder
	back.Table = New()
	if err := wire.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if back.forwards["/run/f.sock"] != "r" || back.Routes["r"].By != "uid:1" {
		t.Fatalf("rebuilt %+v", back.Table)
	}
}

// TestRebuildRefusesEmptyRoute: a snapshot naming a route with no
// revision is refused, naming the route.
func TestRebuildRefusesEmptyRoute(t *testing.T) {
	tb := New()
	tb.Routes["r"], tb.RouteOrder = &Route{Name: "r"}, []string{"r"}
	if err := tb.Rebuild(); err == nil || err.Error() != "route r has no revision" {
		t.Fatalf("got %v", err)
	}
}

// keys is m's keys as strings, sorted.
func keys[K comparable, V any](m map[K]V) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprint(k))
	}
	slices.Sort(out)
	return out
}
