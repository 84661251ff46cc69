package histbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stewardrt/steward/internal/durable"
)

// metaVersion is the version of meta.json's shape.
const metaVersion = 1

// Meta is GEN/meta.json: what Generate made.
type Meta struct {
	Version  int    `json:"version"`
	State    string `json:"state"` // GEN/state: where every copy is restored
	UID      uint32 `json:"uid"`   // the account that made it (the dev mode's)
	Clients  int    `json:"clients"`
	DayCalls int    `json:"dayCalls"`
	// Days is how many times the daemons' clock was stepped a day, and
	// OffsetMs where it ended, ahead of the machine's.
	Days     int        `json:"days"`
	OffsetMs int64      `json:"offsetMs"`
	Began    time.Time  `json:"began"`
	Load     [2]string  `json:"load"` // /proc/loadavg at the start and at the end
	Oldest   OldestCall `json:"oldest"`
	Points   []GenPoint `json:"points"`
	// Samples are the daemons' memory at every day's end and point, with
	// the calls they served since their start.
	Samples []Sample `json:"samples"`
	// Outcomes counts the tool calls by kind and how they ended.
	Outcomes map[string]int `json:"outcomes"`
}

// OldestCall is call 1: what the measurement asks again and expects.
type OldestCall struct {
	Tool    string          `json:"tool"`
	Args    map[string]any  `json:"args"`
	Result  json.RawMessage `json:"result"` // the controller's ToolResult
	Attempt string          `json:"attempt"`
	Receipt string          `json:"receipt"`
	// AppBody and AppAnswer are the invocation the appliance received
	// (the controller's begin keeps its bytes) and the answer it recorded.
	AppBody   []byte `json:"appBody"`
	AppStatus int    `json:"appStatus"`
	AppAnswer []byte `json:"appAnswer"`
}

// GenPoint is one kept state.
type GenPoint struct {
	Calls   int     `json:"calls"`   // bulk calls made
	Elapsed float64 `json:"elapsed"` // seconds since the generation began
	// Disk and Records are each journal's, by daemon.
	Disk    map[string]Disk           `json:"disk"`
	Records map[string]map[string]int `json:"records"` // daemon -> kind -> count
	// Served is the daemons' memory just before they were stopped here.
	Served *Sample `json:"served,omitempty"`
}

// Disk is one daemon's history on disk.
type Disk struct {
	Used     int64 `json:"used"`     // bytes allocated (st_blocks) to its journal directory
	Apparent int64 `json:"apparent"` // bytes of the files of its journal, snapshots and index
	Files    int   `json:"files"`
	Data     int64 `json:"data"` // bytes of its records
	// Snapshots and Index are the bytes allocated to its snapshots and
	// its history index (0 before they existed).
	Snapshots int64 `json:"snapshots"`
	Index     int64 `json:"index"`
}

// Sample is the generator daemons' memory at one quiet moment.
type Sample struct {
	Calls int     `json:"calls"` // bulk calls made
	Rate  float64 `json:"rate"`  // bulk calls/s since the last sample
	// Daemons are by name: VmRSS and VmHWM and the bulk calls each served
	// since its start.
	Daemons map[string]Served `json:"daemons"`
}

// Served is one daemon's memory after serving Since calls since its
// start, and the CPU it has spent since then (seconds).
type Served struct {
	Since int     `json:"since"`
	RSS   int64   `json:"rss"`  // bytes
	Anon  int64   `json:"anon"` // RssAnon, bytes; 0 in a generation from before it was read
	HWM   int64   `json:"hwm"`
	CPU   float64 `json:"cpu"`
}

func newMeta(o GenOptions) *Meta {
	return &Meta{Version: metaVersion, Clients: o.Clients, DayCalls: o.DayCalls, Began: time.Now().UTC(),
		Load: [2]string{loadavg(), ""}}
}

// ReadMeta reads GEN/meta.json; an error wrapping os.ErrNotExist when
// there is none.
func ReadMeta(dir string) (*Meta, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s/meta.json: %w", dir, err)
	}
	if m.Version != metaVersion {
		return nil, fmt.Errorf("%s/meta.json is of version %d, not %d: generate again", dir, m.Version, metaVersion)
	}
	if len(m.Points) == 0 || m.Points[len(m.Points)-1].Served == nil {
		return nil, errors.New(dir + "/meta.json is of a generation that did not finish: remove it and generate again")
	}
	return &m, nil
}

func (m *Meta) write(dir string) error {
	m.Load[1] = loadavg()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteAtomic(filepath.Join(dir, "meta.json"), append(b, '\n'), 0o600)
}

func (m *Meta) pointCalls() []int {
	var out []int
	for _, p := range m.Points {
		out = append(out, p.Calls)
	}
	return out
}

// has reports whether every one of points was kept.
func (m *Meta) has(points []int) bool {
	have := m.pointCalls()
	for _, p := range points {
		if !slices.Contains(have, p) {
			return false
		}
	}
	return true
}

// extends reports whether points are the kept points and some after the
// last of them (the generation can go on to them).
func (m *Meta) extends(points []int) bool {
	last := m.Points[len(m.Points)-1].Calls
	have := m.pointCalls()
	for _, p := range points {
		if p <= last && !slices.Contains(have, p) {
			return false
		}
	}
	return true
}

// Point is the kept point of n calls, or nil.
func (m *Meta) Point(n int) *GenPoint {
	for i := range m.Points {
		if m.Points[i].Calls == n {
			return &m.Points[i]
		}
	}
	return nil
}

func (t *tally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.n)
}

// loadavg is /proc/loadavg's first three figures.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	var a, b1, c string
	fmt.Sscan(string(b), &a, &b1, &c)
	return a + " " + b1 + " " + c
}
