package histbench

import (
	"strings"
	"testing"
)

// TestCheckBounded holds checkBounded to what it must tell apart: a
// start from a snapshot that replays a snapshot interval passes; a full
// replay, a replay past the bound, a daemon that says nothing of its
// start, a state without snapshots, and a point too small to tell each
// fail, naming the daemon.
func TestCheckBounded(t *testing.T) {
	meta := func(records int, snaps int64) *Meta {
		p := GenPoint{Calls: 20_000, Disk: map[string]Disk{}, Records: map[string]map[string]int{}}
		for _, d := range historyDaemons {
			p.Disk[d] = Disk{Snapshots: snaps}
			p.Records[d] = map[string]int{"answer": records}
		}
		return &Meta{Points: []GenPoint{{Calls: 0}, p}}
	}
	starts := func(replayed int64, snapshot string) *Results {
		r := &Results{}
		for _, d := range historyDaemons {
			r.Starts = append(r.Starts, Start{Daemon: d, Calls: 20_000, Run: 1, Replayed: replayed, Snapshot: snapshot},
				Start{Daemon: d, Calls: 0, Run: 1, Replayed: 0})
		}
		return r
	}
	for _, c := range []struct {
		name string
		m    *Meta
		r    *Results
		want string // "" passes
	}{
		{"a snapshot interval", meta(40_000, 4096), starts(9_900, "0000000000030100.snap"), ""},
		{"nothing after the snapshot", meta(40_000, 4096), starts(0, "0000000000040000.snap"), ""},
		{"a full replay", meta(40_000, 4096), starts(40_000, ""), "replayed its whole journal"},
		{"past the bound", meta(40_000, 4096), starts(replayBound+1, "0000000000000003.snap"), "more than"},
		{"says nothing", meta(40_000, 4096), starts(-1, ""), "says nothing"},
		{"no snapshot on disk", meta(40_000, 0), starts(0, "0000000000040000.snap"), "holds no snapshot"},
		{"too small a point", meta(replayBound, 4096), starts(0, "0000000000015000.snap"), "a larger point is needed"},
	} {
		errs := checkBounded(c.m, c.r)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.name, errs)
		case c.want != "" && len(errs) < len(historyDaemons):
			t.Errorf("%s: %d errors (%v), want one for each of %v", c.name, len(errs), errs, historyDaemons)
		}
		for _, err := range errs {
			if c.want == "" || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
		}
	}
}
