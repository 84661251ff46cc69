package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	kindBind   = "bind"
	kindRebind = "rebind"
)

// bindBody is the body of record 1: it binds the log to its owner, format
// and config, and records the segment size it was made with.
type bindBody struct {
	Owner   string `cbor:"owner"`
	Format  string `cbor:"format"`
	Binding []byte `cbor:"binding"` // SHA-256 of Config
	Config  []byte `cbor:"config"`  // the owner's bytes, not interpreted (canonical JSON for every steward owner)
	// SegmentSize is the preallocated size at which the log's segments
	// rotate, 1 to MaxSegmentSize. It is absent (nil) in the bind record of
	// a log made before the size was recorded (the v1 golden journals):
	// such a log takes Options.SegmentSize, as every open did then.
	SegmentSize *uint64 `cbor:"segmentSize,omitempty"`
}

// rebindBody is the body of a rebind record: it retains the config before
// and after, so that a changed binding is always explained by the log.
type rebindBody struct {
	Before  []byte `cbor:"before"`  // config in force until this record
	After   []byte `cbor:"after"`   // config in force from this record
	Binding []byte `cbor:"binding"` // SHA-256 of After
}

// chain is the verification state a scan carries from record to record.
type chain struct {
	next    uint64         // seq the next record must have
	prev    [hashSize]byte // SHA-256 of the last payload
	owner   string         // from the bind record
	format  string         // from the bind record
	config  []byte         // config in force
	binding [hashSize]byte // SHA-256 of config
	rebinds int            // rebind records seen
	segSize int64          // from the bind record; 0 when it records none
	// atMark is the mark a load goes on from until a record after it is
	// verified: a mismatch there is the mark's (ErrMarkMismatch), not
	// damage. markConfig is the mark until a rebind after it applies:
	// until then the config in force is the mark's word.
	atMark     *Mark
	markConfig *Mark
}

func newChain() chain { return chain{next: 1} }

// chainFrom is the chain state at mark m, as a scan of the log up to it
// leaves it.
func chainFrom(m *Mark) chain {
	c := chain{next: m.Seq + 1, owner: m.Owner, format: m.Format, config: bytes.Clone(m.Config),
		rebinds: m.Rebinds, segSize: m.SegmentSize, atMark: m, markConfig: m}
	copy(c.prev[:], m.Head)
	copy(c.binding[:], m.Binding)
	return c
}

// checkConfig checks that binding is the SHA-256 of the config c. The
// journal does not interpret a config: its owner chose the bytes (steward's
// owners, canonical JSON), and the binding is their hash. An empty config is
// refused because Open and Rebind never write one.
func checkConfig(c, binding []byte) error {
	if len(c) == 0 {
		return fmt.Errorf("config is empty")
	}
	if sum := sha256.Sum256(c); !bytes.Equal(binding, sum[:]) {
		return fmt.Errorf("binding %x is not the SHA-256 of the config", binding)
	}
	return nil
}

// apply verifies the meaning of a record that already passed the frame and
// chain checks: record 1 is a valid bind, later records are no bind, and a
// rebind continues from the config in force. It returns a reason on failure.
func (c *chain) apply(r *Record) error {
	if r.Seq == 1 {
		if r.Kind != kindBind {
			return fmt.Errorf("record 1 is kind %q, want %q", r.Kind, kindBind)
		}
		var b bindBody
		if err := decMode.Unmarshal(r.Body, &b); err != nil {
			return fmt.Errorf("bind body: %v", err)
		}
		if b.Owner == "" || b.Format == "" {
			return fmt.Errorf("bind record without owner or format")
		}
		if err := checkConfig(b.Config, b.Binding); err != nil {
			return fmt.Errorf("bind record: %v", err)
		}
		if b.SegmentSize != nil {
			if n := *b.SegmentSize; n == 0 || n > MaxSegmentSize {
				return fmt.Errorf("bind record: segment size %d is not 1 to %d", n, MaxSegmentSize)
			}
			c.segSize = int64(*b.SegmentSize)
		}
		c.owner, c.format, c.config = b.Owner, b.Format, b.Config
		copy(c.binding[:], b.Binding)
		return nil
	}
	switch r.Kind {
	case kindBind:
		return fmt.Errorf("bind record at seq %d", r.Seq)
	case kindRebind:
		var b rebindBody
		if err := decMode.Unmarshal(r.Body, &b); err != nil {
			return fmt.Errorf("rebind body: %v", err)
		}
		if !bytes.Equal(b.Before, c.config) {
			return fmt.Errorf("rebind record's before config is not the config in force")
		}
		if err := checkConfig(b.After, b.Binding); err != nil {
			return fmt.Errorf("rebind record: %v", err)
		}
		c.config = b.After
		copy(c.binding[:], b.Binding)
		c.rebinds++
		c.markConfig = nil
	}
	return nil
}

// Rebind appends a rebind record that retains the current config and
// after, and makes SHA-256(after) the binding. The journal does not
// interpret after: a caller whose config is JSON passes its canonical form
// (canonjson.CanonicalJSON), so that the binding survives reformatting. An
// empty after is refused. It returns after the record is on disk, like
// Append.
func (j *Journal) Rebind(after []byte) (uint64, error) {
	if len(after) == 0 {
		return 0, errEmptyConfig
	}
	p, err := j.submit(kindRebind, nil, bytes.Clone(after), nil)
	return p.Seq, err
}

// errEmptyConfig refuses a config the journal could not tell from no
// config: nil Options.Config means "do not check" on an existing log.
var errEmptyConfig = errors.New("journal: the config is empty; a journal binds a non-empty config")

// rebindRecordBody encodes the body of a rebind from before to after.
func rebindRecordBody(before, after []byte) ([]byte, error) {
	sum := sha256.Sum256(after)
	return encMode.Marshal(rebindBody{Before: before, After: after, Binding: sum[:]})
}

// bindRecordBody encodes the body of record 1.
func bindRecordBody(owner, format string, config []byte, segmentSize int64) ([]byte, error) {
	sum := sha256.Sum256(config)
	size := uint64(segmentSize)
	return encMode.Marshal(bindBody{Owner: owner, Format: format, Binding: sum[:], Config: config, SegmentSize: &size})
}
