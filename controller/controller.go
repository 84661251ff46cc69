package controller

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/stewardrt/steward/controller/ledger"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// Controller is the controller's state: its config, the host it trusts, its
// keys, its journal and the index rebuilt from it. Serve runs it as a
// daemon; the attempts commands use it with the daemon stopped.
type Controller struct {
	cfg  *Config
	raw  []byte
	bind *Binding
	keys *Keys
	j    *journal.Journal
	led  *ledger.Ledger
	// hist is the keeper of the journal's snapshots and the history index
	// (history.go); nil for a controller made on a bare journal (tests).
	hist *opened
	// ctl is the control channel (control.go); routes the live route
	// table and the forward channels of its routes (liveroutes.go).
	ctl    *hostChannel
	routes routeTable
	log    *slog.Logger
	limits sync.Map         // application -> int: its limits.request_bytes, once seen
	gate   sync.RWMutex     // read-held by each dispatch; write-held from shutdown on
	now    func() time.Time // the wall clock: the daemon's only source of time
	// firstRequest is how long a new MCP or foreground connection has to
	// send its first request, and a foreground one between requests.
	firstRequest time.Duration
	pay          *payer
	grants       grantCache
	// ownConsents pins the controller's own dispatch key: a receipt's
	// consent is checked against it when the consent is not in memory.
	ownConsents *wire.Keyring
	// hostname is this host's name (os.Hostname), read once at start: an
	// address's node must be it (address.go). "" when it could not be read.
	hostname string
	// asks are the calls that wait for an approval (approval.go).
	asks *approvals
	// flight are the dispatches and collects in flight, which alone a
	// reserve may be consented for (consent_guard.go).
	flight flights
	// writes are the result records journaled after their answers went
	// out (resultwrite.go).
	writes *resultWrites
	// archiving is held by a `history archive` (archive.go): one at a
	// time, so that two never export for the same records.
	archiving sync.Mutex
}

// open loads everything but the sockets: config, bundle, keys, the
// history index and the journal (bound to the config bytes; o.segmentSize
// when it creates it), opened through its history: the ledger is the
// newest usable snapshot's and the records after it.
func open(cfgPath string, log *slog.Logger, o historyOpts, now func() time.Time) (*Controller, error) {
	cfg, raw, err := LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	bind, err := LoadBundle(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	keys, err := LoadKeys(cfg.KeyDir)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	h, err := openHistory(cfg, raw, log, o)
	if err != nil {
		return nil, err
	}
	c := newController(cfg, raw, bind, keys, h.keeper.Journal(), log, now)
	c.led, c.hist = h.led, h
	c.pay = newPayer(cfg.Payer, c.log, c.led)
	return c, nil
}

// newController builds a controller on an empty ledger; the payer starts
// empty too (open replaces it with the journal's). now nil is time.Now.
func newController(cfg *Config, raw []byte, bind *Binding, keys *Keys, j *journal.Journal, log *slog.Logger, now func() time.Time) *Controller {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	led := ledger.New()
	c := &Controller{cfg: cfg, raw: raw, bind: bind, keys: keys, j: j, led: led, routes: newRouteTable(), log: log,
		now: now, pay: newPayer(cfg.Payer, log, led), ownConsents: wire.NewKeyring(keys.Dispatch.Public()), asks: newApprovals(), writes: newResultWrites()}
	if h, err := os.Hostname(); err == nil {
		c.hostname = h
	} else {
		log.Warn("this host's name could not be read: addresses with a node prefix are refused", "err", err)
	}
	c.ctl = newControl(c)
	return c
}

// ErrBinding is wrapped when the config does not match the journal's binding.
var ErrBinding = errors.New("config binding mismatch")

// openJournal opens the controller journal bound to the canonical form of
// the config file's bytes (the journal binds what it is given; canonical,
// a config file reformatted by hand binds the same). A mismatch names both
// bindings and how to enroll, in one line. segmentSize is the segment size
// of a journal it creates (0: the default).
func openJournal(cfg *Config, raw []byte, segmentSize int64) (*journal.Journal, error) {
	dir := cfg.JournalDir()
	canon, err := canonjson.CanonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("controller journal: config for %s: %w", dir, err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("controller state: %w", err)
	}
	j, err := journal.Open(dir, journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: canon, SegmentSize: segmentSize})
	if errors.Is(err, journal.ErrBindingMismatch) {
		return nil, bindingError(dir, canon)
	}
	if err != nil {
		return nil, fmt.Errorf("controller journal: %w", err)
	}
	return j, nil
}

// bindingError says that the config canon is not the binding of the
// journal in dir, naming both and how to enroll, in one line.
func bindingError(dir string, canon []byte) error {
	want := sha256.Sum256(canon)
	var have [32]byte
	if ro, rerr := journal.Open(dir, journal.Options{ReadOnly: true}); rerr == nil {
		have = ro.Binding()
		ro.Close()
	}
	return fmt.Errorf("%w: config binding %x does not match the journal's %x: enroll the new config with steward-installer controller-enroll", ErrBinding, want, have)
}

// Close waits for the dispatches in flight and the result records
// being journaled after their answers, then closes the forward
// channels, the control channel and the journal.
func (c *Controller) Close() error {
	c.asks.stop() // a parked call collects once and ends, not at its ParkUntil
	c.gate.Lock() // never unlocked: no dispatch starts after Close
	// The answers already out have their result records journaled before
	// the journal closes; with the gate held no new one starts.
	c.writes.drain()

	c.routes.closeAll()
	c.ctl.close()
	if c.hist == nil {
		return c.j.Close()
	}
	// A last snapshot (the next start replays nothing), the journal
	// closed, then the index, which that snapshot synced.
	err := c.hist.keeper.Close()
	if xerr := c.hist.idx.Close(); xerr != nil && err == nil {
		err = fmt.Errorf("controller history index: %w", xerr)
	}
	return err
}

// newID returns 128 random bits in hex: attempt and foreground ids.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}
