package histbench

import (
	"fmt"
	"slices"

	"github.com/stewardrt/steward/journal/history"
)

// historyDaemons are the daemons that keep their history on disk
// (DESIGN.md section 13): their starts load a snapshot and replay only
// what follows it. Any other daemon whose state holds snapshots is held
// to the same (the controller, once its history is merged).
var historyDaemons = []string{"host", "appliance"}

// replayBound is the most records a start may replay after the snapshot
// it loads: a snapshot interval (the keeper makes one at its first tick
// after history.DefaultEvery records, and at a clean stop), and half of
// one again for the records of that tick.
const replayBound = history.DefaultEvery * 3 / 2

// checkBounded holds the starts of r on the generation m to the bound of
// history: every start of a daemon with history, at every point but 0,
// as kept or a snapshot back, loaded a snapshot and replayed at most
// replayBound records, whatever the history behind it. The largest
// point must hold more records than that in each such journal, or the
// check could not tell a bounded start from a full replay.
func checkBounded(m *Meta, r *Results) []error {
	var errs []error
	largest := 0
	for _, s := range r.Starts {
		largest = max(largest, s.Calls)
	}
	checked := map[string]bool{}
	for _, s := range r.Starts {
		if s.Calls == 0 || s.Daemon == "steward-dev" {
			continue
		}
		p := m.Point(s.Calls)
		d := p.Disk[s.Daemon]
		if !slices.Contains(historyDaemons, s.Daemon) && d.Snapshots == 0 {
			continue
		}
		at := fmt.Sprintf("%s at %d calls (start %d%s)", s.Daemon, s.Calls, s.Run, map[bool]string{true: ", a snapshot back"}[s.Back])
		switch {
		case d.Snapshots == 0:
			errs = append(errs, fmt.Errorf("%s: its state holds no snapshot", at))
		case s.Replayed < 0:
			errs = append(errs, fmt.Errorf("%s: its log says nothing of the snapshot it loaded and the records it replayed", at))
		case s.Snapshot == "":
			errs = append(errs, fmt.Errorf("%s: it replayed its whole journal (%d records), no snapshot", at, s.Replayed))
		case s.Replayed > replayBound:
			errs = append(errs, fmt.Errorf("%s: it replayed %d records after %s, more than %d", at, s.Replayed, s.Snapshot, replayBound))
		}
		if s.Calls == largest && !checked[s.Daemon] {
			checked[s.Daemon] = true
			if n := count(p.Records[s.Daemon]); n <= replayBound {
				errs = append(errs, fmt.Errorf("%s: its journal holds %d records, no more than the bound %d: a larger point is needed to tell",
					at, n, replayBound))
			}
		}
	}
	for _, d := range historyDaemons {
		if !checked[d] && largest > 0 {
			errs = append(errs, fmt.Errorf("%s: no start at %d calls was measured", d, largest))
		}
	}
	return errs
}
