package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// Journal identity of the host journal.
const (
	JournalOwner  = "steward-operator"
	JournalFormat = "steward-host-journal-v1"
)

// File names inside the store.
const (
	keyFile     = "operator.key"
	pubFile     = "operator.pub"
	journalDir  = "journal"
	adminSocket = "admin.sock"
)

// Store is an open operator store: the operator key and the host journal,
// with the state rebuilt from it. Its methods are safe for concurrent use;
// the host daemon and the admin socket share one Store.
type Store struct {
	dir      string
	key      *wire.HybridSigningKey // nil when read-only
	pub      *wire.HybridPublicKey
	hostRing *wire.Keyring // the Ed25519 half, for receipts and frames
	j        *journal.Journal
	readOnly bool

	adminMu sync.Mutex // serializes administrative mutations (check, append, apply)
	mu      sync.Mutex // guards st
	// receiptTurn is held from signing a receipt to its record's place in
	// the journal (receipt.go), so receipts reach the log in chain order.
	receiptTurn sync.Mutex
	// askMu serializes the appends of ask records (ask, ask-answer,
	// ask-expired) each with its apply, taken before mu: the ask events
	// are then in journal order, which the watch cursor relies on, and
	// an advisor's bound is counted over answers one at a time.
	askMu sync.Mutex
	st    *state
	// now is the wall clock: the store's and the daemon's only source of
	// wall time (ServeOptions.Now sets it; tests inject one). It is read
	// only through clock, which never lets time run backwards.
	now  func() time.Time
	log  *slog.Logger // where the clock going back is reported
	wake func()       // wakes the checkpointer after an outcome; nil without a host
	// listening is the running host's forward listeners (routelisten.go),
	// which a route change prepares and settles (mutateRoute); nil
	// without a host. Set before the admin socket is listened on.
	listening *routeListeners
	// controls is the running host's control sockets (controllisten.go),
	// which controller add and controller control prepare and commit
	// (mutateControl); nil without a host. Set before the admin socket is
	// listened on.
	controls *controlListeners
	// askDecided is told of every ask answered or expired, once its record
	// is durable: the running host pushes the verdict to the controller
	// (ask_push.go); nil without a host.
	askDecided func(askDecision)
}

// storeConfig is the journal's bound config: the store's identity.
type storeConfig struct {
	OperatorKID string `json:"operatorKid"`
}

// configFor is the config the host journal binds for the store's key: the
// canonical JSON of its storeConfig (the journal binds the bytes it is
// given; these are the bytes every host journal holds).
func configFor(pub *wire.HybridPublicKey) []byte {
	b, err := json.Marshal(storeConfig{OperatorKID: pub.KID().String()})
	if err == nil {
		b, err = canonjson.CanonicalJSON(b)
	}
	if err != nil {
		// A struct of one string always encodes, and encoding/json's output
		// is valid JSON without duplicate keys.
		panic("operator: the store config does not encode: " + err.Error())
	}
	return b
}

// InitOptions configure InitWith.
type InitOptions struct {
	// JournalSegmentSize is the host journal's segment size, which the
	// journal records and keeps (journal.Options.SegmentSize); the
	// journal's default when 0.
	JournalSegmentSize int64
}

// Init creates a new operator store in dir (0700): the operator's hybrid key
// and the host journal. It refuses a dir that already exists.
func Init(dir string) (*wire.HybridPublicKey, error) { return InitWith(dir, InitOptions{}) }

// InitWith is Init with options. The store is built whole under a
// temporary name beside dir and renamed into place (durable.BuildDir): a
// failure (a full disk) leaves no dir, so a second init can succeed; a
// temporary left by a crashed init is removed, and that logged on
// slog.Default(); one that a running init holds is refused.
func InitWith(dir string, opts InitOptions) (*wire.HybridPublicKey, error) {
	var pub *wire.HybridPublicKey
	err := durable.BuildDir(dir, 0o700, slog.Default(), func(tmp string) error {
		var err error
		pub, err = buildStore(tmp, opts)
		return err
	})
	switch {
	case errors.Is(err, os.ErrExist):
		return nil, refusedf("store %s already exists", dir)
	case errors.Is(err, durable.ErrBuildUnderWay):
		return nil, refusedf("store %s: %v", dir, err)
	case err != nil:
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	return pub, nil
}

// buildStore writes a new store's key, public key and empty journal into
// dir, which exists and is empty.
func buildStore(dir string, opts InitOptions) (*wire.HybridPublicKey, error) {
	key, err := wire.GenerateHybridKey()
	if err != nil {
		return nil, err
	}
	if err := wire.WriteHybridKey(filepath.Join(dir, keyFile), key); err != nil {
		return nil, err
	}
	if err := durable.WriteNew(filepath.Join(dir, pubFile), key.Public().MarshalCOSEKey(), 0o644); err != nil {
		return nil, err
	}
	j, err := journal.Open(filepath.Join(dir, journalDir), journal.Options{
		Owner: JournalOwner, Format: JournalFormat, Config: configFor(key.Public()),
		SegmentSize: opts.JournalSegmentSize,
	})
	if err != nil {
		return nil, err
	}
	if err := j.Close(); err != nil {
		return nil, err
	}
	return key.Public(), nil
}

// Open opens the store in dir for writing, taking the journal's lock. While
// the host daemon runs, Open fails with an error wrapping journal.ErrLocked.
func Open(dir string) (*Store, error) {
	key, err := wire.ReadHybridKey(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(filepath.Join(dir, journalDir), journal.Options{
		Owner: JournalOwner, Format: JournalFormat, Config: configFor(key.Public()),
	})
	if err != nil {
		return nil, err
	}
	s := newStore(dir, key.Public(), j)
	s.key = key
	if err := s.replay(); err != nil {
		j.Close()
		return nil, err
	}
	return s, nil
}

// OpenReadOnly opens the store for inspection: it takes no lock and never
// writes, so it works while the daemon runs. It needs only operator.pub,
// which must match the journal's binding.
func OpenReadOnly(dir string) (*Store, error) {
	b, err := os.ReadFile(filepath.Join(dir, pubFile))
	if err != nil {
		return nil, err
	}
	pub, err := wire.ParseHybridPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, pubFile), err)
	}
	j, err := journal.Open(filepath.Join(dir, journalDir), journal.Options{
		Owner: JournalOwner, Format: JournalFormat, Config: configFor(pub), ReadOnly: true,
	})
	if err != nil {
		return nil, err
	}
	s := newStore(dir, pub, j)
	s.readOnly = true
	if err := s.replay(); err != nil {
		j.Close()
		return nil, err
	}
	return s, nil
}

func newStore(dir string, pub *wire.HybridPublicKey, j *journal.Journal) *Store {
	return &Store{
		dir: dir, pub: pub, hostRing: wire.NewKeyring(pub.Ed25519()), j: j,
		st: newState(), now: time.Now, log: slog.Default(),
	}
}

// clock reads the wall clock, never earlier than the latest time already
// recorded or read (state.latest): a clock set back must not refill a daily
// limit nor revive an expired grant, so until the clock catches up the host
// keeps the latest time it knows. The first reading that goes back is
// logged; the next one after the clock has caught up logs again.
func (s *Store) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clockLocked()
}

// clockLocked is clock with s.mu held.
func (s *Store) clockLocked() time.Time {
	st := s.st
	t := s.now()
	ms := t.UnixMilli()
	if ms >= st.latest {
		st.latest, st.clockBack = ms, false
		return t
	}
	if !st.clockBack {
		st.clockBack = true
		s.log.Warn("steward-operator: the wall clock went back; the host keeps the latest time it recorded until the clock catches up (no daily limit refills, no expired grant revives)",
			"clock", t.UTC().Format(time.RFC3339Nano), "latest", time.UnixMilli(st.latest).UTC().Format(time.RFC3339Nano))
	}
	return time.UnixMilli(st.latest)
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// PublicKey returns the operator's public hybrid key.
func (s *Store) PublicKey() *wire.HybridPublicKey { return s.pub }

// Close closes the journal.
func (s *Store) Close() error { return s.j.Close() }

// append writes one record, refusing on a read-only store.
func (s *Store) append(kind string, body any) (uint64, error) {
	if s.readOnly {
		return 0, fmt.Errorf("store %s is open read-only", s.dir)
	}
	return s.j.Append(kind, body)
}

// release returns an attempt's reservation to its purse and its daily count.
func (st *state) release(a *attempt) {
	if c := st.controllers[a.controller]; c != nil {
		c.purse.charged -= a.charge
	}
	if g := st.grants[a.grant]; g != nil && g.day == a.day && g.count > 0 {
		g.count--
	}
	st.agentUnhold(a.controller, a.agent, a.conversation, a.day, a.charge)
}

// use counts one admitted request on UTC day d. A day earlier than the
// latest one counted (a clock set back) counts on the latest: the count
// never goes back to a day it has left, so it never refills.
func (g *grant) use(d int64) {
	if d > g.day {
		g.day, g.count = d, 0
	}
	g.count++
}

// usedOn reports the grant's count on UTC day d: the latest day's count for
// any day up to it (see use), 0 for a later day.
func (g *grant) usedOn(d int64) uint64 {
	if d > g.day {
		return 0
	}
	return g.count
}

// utcDay is the UTC day number of t: unix ms / 86,400,000.
func utcDay(t time.Time) int64 { return t.UnixMilli() / 86_400_000 }
