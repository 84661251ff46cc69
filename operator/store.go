package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stewardrt/steward/internal/durable"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
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
	st      *state
	now     func() time.Time
	wake    func() // wakes the checkpointer after an outcome; nil without a host
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

// InitWith is Init with options.
func InitWith(dir string, opts InitOptions) (*wire.HybridPublicKey, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, refusedf("store %s already exists", dir)
		}
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	// Mkdir applies the umask; the store must be exactly 0700.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
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
	// The key file's name and the store's own name in its parent are
	// durable only once both directories are synced.
	if err := durable.SyncDir(dir); err != nil {
		return nil, err
	}
	if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
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
		st: newState(), now: time.Now,
	}
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

// replay rebuilds the state from every record of the journal.
func (s *Store) replay() error {
	st := s.st
	err := s.j.Iterate(1, func(r journal.Record) error {
		if err := st.replayRecord(r, s.pub); err != nil {
			return recordError(r.Seq, r.Kind, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(st.pending) != 0 {
		return fmt.Errorf("host journal: %w", faultf("the receipt chain has a gap: receipt %d is missing (%d later receipts are durable)", st.durableSeq+1, len(st.pending)))
	}
	st.signedSeq, st.signedHead = st.durableSeq, st.durableHead
	return nil
}

func decode(r journal.Record, v any) error { return wire.Unmarshal(r.Body, v) }

func (st *state) replayRecord(r journal.Record, pub *wire.HybridPublicKey) error {
	switch r.Kind {
	case "bind", "rebind": // the journal's own records
		return nil
	case kindControllerAdd:
		var b recControllerAdd
		if err := decode(r, &b); err != nil {
			return err
		}
		c, err := st.checkControllerAdd(b)
		if err != nil {
			return err
		}
		st.addController(c)
	case kindPurseFund:
		var b recPurseFund
		if err := decode(r, &b); err != nil {
			return err
		}
		c, err := st.controller(b.Controller)
		if err != nil {
			return err
		}
		c.purse.funded += b.Amount
		st.seeLedger(b.Ledger)
	case kindPurseFreeze, kindPurseThaw:
		var b recPurse
		if err := decode(r, &b); err != nil {
			return err
		}
		c, err := st.controller(b.Controller)
		if err != nil {
			return err
		}
		c.purse.frozen = r.Kind == kindPurseFreeze
	case kindGrantIssue:
		var b recGrantIssue
		if err := decode(r, &b); err != nil {
			return err
		}
		g, err := st.checkGrant(b.Grant, pub)
		if err != nil {
			return err
		}
		st.addGrant(g, b.Grant)
	case kindGrantRevoke:
		var b recGrantRevoke
		if err := decode(r, &b); err != nil {
			return err
		}
		g, ok := st.grants[b.ID]
		if !ok {
			return fmt.Errorf("revokes unknown grant %s", b.ID)
		}
		g.revoked = true
	case kindRouteRegister:
		var b recRouteRegister
		if err := decode(r, &b); err != nil {
			return err
		}
		rec, id, err := st.checkRoute(b.Record, pub)
		if err != nil {
			return err
		}
		st.addRoute(rec, b.Record, id)
	case kindReserve:
		var b recReserve
		if err := decode(r, &b); err != nil {
			return err
		}
		if _, dup := st.attempts[b.Attempt]; dup {
			return fmt.Errorf("attempt %s reserved twice", b.Attempt)
		}
		c, err := st.controller(b.Controller)
		if err != nil {
			return err
		}
		g, ok := st.grants[b.Grant]
		if !ok {
			return fmt.Errorf("attempt %s: unknown grant %s", b.Attempt, b.Grant)
		}
		c.purse.charged += b.Charge
		g.use(b.Day)
		st.seeLedger(b.Ledger)
		// Until a later record says otherwise, a reservation without an
		// outcome is uncertain: sending may have begun before a crash.
		st.attempts[b.Attempt] = &attempt{
			id: b.Attempt, controller: b.Controller, grant: b.Grant, charge: b.Charge,
			day: b.Day, state: msg.StateUncertain, detail: "the host stopped before recording an outcome",
		}
	case kindNotSent:
		var b recNotSent
		if err := decode(r, &b); err != nil {
			return err
		}
		a, err := st.attemptIn(b.Attempt, msg.StateUncertain)
		if err != nil {
			return err
		}
		st.release(a)
		a.state, a.detail = msg.StateNotSent, b.Detail
		st.seeLedger(b.Ledger)
	case kindUncertain:
		var b recUncertain
		if err := decode(r, &b); err != nil {
			return err
		}
		a, err := st.attemptIn(b.Attempt, msg.StateUncertain)
		if err != nil {
			return err
		}
		a.detail = b.Detail
	case kindOutcome:
		var b recOutcome
		if err := decode(r, &b); err != nil {
			return err
		}
		a, err := st.attemptIn(b.Attempt, msg.StateUncertain)
		if err != nil {
			return err
		}
		a.state, a.outcomeSeq, a.detail = msg.StateDefinite, r.Seq, ""
		if b.Seq <= st.durableSeq || st.pending[b.Seq] != nil {
			return fmt.Errorf("receipt %d appears twice", b.Seq)
		}
		st.markDurable(b.Seq, msg.ReceiptHash(b.Receipt))
		st.seeLedger(b.Ledger)
	case kindCheckpoint:
		var b recCheckpoint
		if err := decode(r, &b); err != nil {
			return err
		}
		if b.Seq > st.checkpoint {
			st.checkpoint = b.Seq
		}
	default:
		return fmt.Errorf("unknown record kind %q", r.Kind)
	}
	return nil
}

func (st *state) seeLedger(n uint64) {
	if n > st.ledger {
		st.ledger = n
	}
}

func (st *state) attemptIn(id, want string) (*attempt, error) {
	a, ok := st.attempts[id]
	if !ok {
		return nil, fmt.Errorf("attempt %s has no reserve record", id)
	}
	if a.state != want {
		return nil, fmt.Errorf("attempt %s is %s, not %s", id, a.state, want)
	}
	return a, nil
}

// release returns an attempt's reservation to its purse and its daily count.
func (st *state) release(a *attempt) {
	if c := st.controllers[a.controller]; c != nil {
		c.purse.charged -= a.charge
	}
	if g := st.grants[a.grant]; g != nil && g.day == a.day && g.count > 0 {
		g.count--
	}
}

// use counts one admitted request on UTC day d.
func (g *grant) use(d int64) {
	if d > g.day {
		g.day, g.count = d, 0
	}
	if d == g.day {
		g.count++
	}
}

// usedOn reports the grant's count on UTC day d.
func (g *grant) usedOn(d int64) uint64 {
	if d != g.day {
		return 0
	}
	return g.count
}

// utcDay is the UTC day number of t: unix ms / 86,400,000.
func utcDay(t time.Time) int64 { return t.UnixMilli() / 86_400_000 }
