package journal

import (
	"encoding/hex"
	"encoding/json"
)

// Summary describes a journal for inspection (`journal inspect --json`).
type Summary struct {
	Dir     string `json:"dir"`
	Owner   string `json:"owner"`
	Format  string `json:"format"`
	Binding string `json:"binding"` // hex SHA-256 of Config
	// Config is the config in force, embedded as the JSON it is for every
	// steward owner (the journal does not check: json.Marshal refuses a
	// Summary of a log bound to bytes that are not JSON).
	Config     json.RawMessage  `json:"config,omitempty"`
	Rebinds    int              `json:"rebinds"`
	Records    uint64           `json:"records"`
	FirstSeq   uint64           `json:"first_seq"`
	LastSeq    uint64           `json:"last_seq"`
	Head       string           `json:"head"` // hex SHA-256 of the last payload
	Segments   []SegmentSummary `json:"segments"`
	Recoveries []Recovery       `json:"recoveries"`
	ReadOnly   bool             `json:"read_only"`
	Failure    string           `json:"failure,omitempty"` // the I/O failure that poisoned the journal

	// SegmentSize is the segment size in force (see Journal.SegmentSize).
	SegmentSize int64 `json:"segment_size"`
}

// SegmentSummary describes one segment file. After an Open with
// Options.From, the segments before the mark's were not read: their
// LastSeq and Records come from the segment names alone (the next
// segment's first seq) and their Used is their size.
type SegmentSummary struct {
	Name     string `json:"name"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"` // 0 when the segment holds no record yet
	Records  uint64 `json:"records"`
	Used     int64  `json:"used_bytes"` // bytes up to the end of the last record
	Size     int64  `json:"size_bytes"` // preallocated file size
}

// Summary returns the journal's current state.
func (j *Journal) Summary() Summary {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := Summary{
		Dir:        j.dir,
		Owner:      j.owner,
		Format:     j.format,
		Rebinds:    j.rebinds,
		Records:    j.lastSeq,
		LastSeq:    j.lastSeq,
		Head:       hex.EncodeToString(j.head[:]),
		Segments:   []SegmentSummary{},
		Recoveries: append([]Recovery{}, j.recoveries...),
		ReadOnly:   j.opts.ReadOnly,

		SegmentSize: j.segmentSize,
	}
	if j.lastSeq > 0 {
		s.FirstSeq = 1
		s.Binding = hex.EncodeToString(j.binding[:])
		s.Config = json.RawMessage(append([]byte(nil), j.config...))
	}
	if j.err != nil {
		s.Failure = j.err.Error()
	}
	for _, g := range j.segs {
		s.Segments = append(s.Segments, SegmentSummary{Name: g.name, FirstSeq: g.first, LastSeq: g.last,
			Records: g.records, Used: g.end, Size: g.size})
	}
	return s
}

// Inspect opens dir read-only (no lock, no writes, a torn tail reported but
// left in place) and returns its summary.
func Inspect(dir string) (Summary, error) {
	j, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		return Summary{}, err
	}
	defer j.Close()
	return j.Summary(), nil
}
