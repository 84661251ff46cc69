package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/operator/hostapi"
	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
)

// KeyFile is the operator's hybrid signing key in a store (COSE_Key,
// 0600; wire.WriteHybridKey). The store's other files are the journal's
// (hostlog.PubFile, hostlog.JournalDir) and, while the host runs, its
// admin socket (admin.SocketName).
const KeyFile = "operator.key"

// Store is an open operator store: the operator key and the host journal,
// with the state rebuilt from it. Its methods are safe for concurrent use;
// the host daemon and the admin socket share one Store.
type Store struct {
	dir      string
	key      *wire.HybridSigningKey // nil when read-only
	pub      *wire.HybridPublicKey
	hostRing *wire.Keyring // the Ed25519 half, for receipts and frames
	j        *journal.Journal
	hist     hosthist.Opened // the journal's keeper and the history index
	readOnly bool

	// The store's locks, in the order they are taken (a lock is never
	// taken while one after it is held, and every one is taken and given
	// up in the same function, but receiptTurn, which the journal gives up:
	// commitEnd):
	//
	//	adminMu → askMu → mu → receiptTurn
	//
	// The daemon's locks are taken before any of them or alone: the store
	// calls the Daemon with none of them held but adminMu.

	// adminMu serializes administrative changes from check to apply
	// (mutate.go), so that what was checked still holds when it is
	// applied.
	adminMu sync.Mutex
	// askMu serializes the appends of ask records (ask, ask-answer,
	// ask-expired) each with its apply: the ask events are then in
	// journal order, which the watch cursor relies on, and an advisor's
	// bound is counted over answers one at a time.
	askMu sync.Mutex
	// mu guards st, the one state: no field of it is read or written
	// without mu, and no other package reaches it but through the store's
	// own calls with mu held (the routes: package operator/routetable's
	// Table, which the state embeds and which takes no lock of its own).
	mu sync.Mutex
	// receiptTurn is held from signing a receipt to its record's place in
	// the journal (commitEnd), so receipts reach the log in chain order.
	receiptTurn sync.Mutex
	st          *state
	// now is the wall clock: the store's and the daemon's only source of
	// wall time (Options.Now). It is read only through clock, which never
	// lets time run backwards, and deadlineClock.
	now func() time.Time
	log *slog.Logger
	// daemon is the running host serving the store (Options.Daemon), or
	// hostapi.Offline for a store a command opened.
	daemon Daemon
	// warned holds the keys of the warnings logged once (warnOnce).
	warned sync.Map
	// askBounds are the caps on pending asks (Options.AskBounds, defaults
	// filled in).
	askBounds views.AskBounds
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
		return nil, views.Refusedf("store %s already exists", dir)
	case errors.Is(err, durable.ErrBuildUnderWay):
		return nil, views.Refusedf("store %s: %v", dir, err)
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
	if err := wire.WriteHybridKey(filepath.Join(dir, KeyFile), key); err != nil {
		return nil, err
	}
	if err := durable.WriteNew(filepath.Join(dir, hostlog.PubFile), key.Public().MarshalCOSEKey(), 0o644); err != nil {
		return nil, err
	}
	jo := hostlog.Options(key.Public())
	jo.SegmentSize = opts.JournalSegmentSize
	j, err := journal.Open(filepath.Join(dir, hostlog.JournalDir), jo)
	if err != nil {
		return nil, err
	}
	if err := j.Close(); err != nil {
		return nil, err
	}
	if err := hosthist.Init(dir); err != nil {
		return nil, err
	}
	return key.Public(), nil
}

// Open opens the store in dir for writing, taking the journal's lock. While
// the host daemon runs, Open fails with an error wrapping journal.ErrLocked.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options: the running host opens its store so.
func OpenWith(dir string, o Options) (*Store, error) {
	key, err := ReadKey(dir)
	if err != nil {
		return nil, err
	}
	return openStore(dir, key.Public(), key, o)
}

// OpenReadOnly opens the store for inspection: it takes no lock and never
// writes, so it works while the daemon runs. It needs only operator.pub,
// which must match the journal's binding.
func OpenReadOnly(dir string) (*Store, error) {
	pub, err := hostlog.ReadPub(dir)
	if err != nil {
		return nil, err
	}
	return openStore(dir, pub, nil, Options{})
}

// openStore opens the store's journal through its history (package
// hosthist: the newest usable snapshot and the records after it) and
// takes the state so replayed; read-only when key is nil.
func openStore(dir string, pub *wire.HybridPublicKey, key *wire.HybridSigningKey, o Options) (*Store, error) {
	s := newStore(dir, pub, nil, o)
	s.key, s.readOnly = key, key == nil
	h, err := hosthist.Open(hosthist.Options{
		Dir: dir, Pub: pub, Key: key, Every: o.SnapshotEvery, Logger: s.log,
		New: func(x *hosthist.Index) history.State {
			st := newState()
			st.hist = x
			return &replayer{st: st, pub: pub}
		},
		Decode: func(x *hosthist.Index, b []byte) (history.State, error) {
			st, err := decodeState(b)
			if err != nil {
				return nil, err
			}
			st.hist = x
			return &replayer{st: st, pub: pub}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	s.hist, s.j, s.st = h, h.Journal(), h.State.(*replayer).st
	if err := s.st.settle(); err != nil {
		h.Close()
		return nil, err
	}
	return s, nil
}

// ReadKey reads the operator's signing key from the store in dir: the
// operator's own account signs the admin socket's handshake with it.
func ReadKey(dir string) (*wire.HybridSigningKey, error) {
	return wire.ReadHybridKey(filepath.Join(dir, KeyFile))
}

func newStore(dir string, pub *wire.HybridPublicKey, j *journal.Journal, o Options) *Store {
	s := &Store{
		dir: dir, pub: pub, hostRing: wire.NewKeyring(pub.Ed25519()), j: j,
		st: newState(), now: o.Now, log: o.Logger, daemon: o.Daemon, askBounds: o.AskBounds.WithDefaults(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.daemon == nil {
		s.daemon = hostapi.Offline{}
	}
	return s
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
	if ms >= st.Latest {
		st.Latest, st.clockBack = ms, false
		return t
	}
	if !st.clockBack {
		st.clockBack = true
		s.log.Warn("steward-operator: the wall clock went back; the host keeps the latest time it recorded until the clock catches up (no daily limit refills, no expired grant revives)",
			"clock", t.UTC().Format(time.RFC3339Nano), "latest", time.UnixMilli(st.Latest).UTC().Format(time.RFC3339Nano))
	}
	return time.UnixMilli(st.Latest)
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// PublicKey returns the operator's public hybrid key.
func (s *Store) PublicKey() *wire.HybridPublicKey { return s.pub }

// Close makes a last snapshot (a store opened for writing, when anything
// was recorded since the last one), closes the journal and the history
// index.
func (s *Store) Close() error { return s.hist.Close() }

// Snapshot makes a snapshot of the state now (when anything was
// recorded since the last one) and drops from the state what it covers;
// it returns the snapshot's file name, "" when none was due.
func (s *Store) Snapshot() (string, error) {
	_, name, err := s.SnapshotMark()
	return name, err
}

// SnapshotMark is Snapshot returning also the mark of the snapshot now
// the newest (the last one's when none was due; the zero Mark when there
// is none): what `history archive` may archive up to.
func (s *Store) SnapshotMark() (journal.Mark, string, error) {
	m, name, err := s.hist.Keeper.Snapshot()
	if err == nil && name != "" {
		s.forget(m)
	}
	return m, name, err
}

// Archive moves the journal's segments wholly before mark m into the new
// archive directory to (journal.Archive). m must be a snapshot's, at or
// before the newest one's, so that the next start loads a snapshot the
// archive leaves whole; the command has exported and verified the
// receipts of what it archives first (`history archive`). What the journal
// refuses (nothing to archive, the directory in use, a mark not of the
// log) is a refusal.
func (s *Store) Archive(to string, m journal.Mark) (journal.Archived, error) {
	if s.readOnly {
		return journal.Archived{}, views.Refusedf("history archive: the store is open read-only")
	}
	a, err := s.hist.Keeper.Archive(to, m)
	if errors.Is(err, history.ErrPastSnapshot) || journal.RefusedArchive(err) {
		return a, views.Refusedf("history archive: %v", err)
	}
	return a, err
}

func (s *Store) forget(m journal.Mark) {
	s.mu.Lock()
	s.st.forget(m.Seq)
	s.mu.Unlock()
}

// Held is what the state holds in memory: attempts, asks and ask events
// (what ended leaves it at each snapshot).
func (s *Store) Held() (attempts, asks, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.Attempts), len(s.st.Asks), len(s.st.AskEvents)
}

// Loaded says what the open loaded: the snapshot ("" after a full
// replay), how many records were replayed after it, and the snapshots
// refused, each with why.
func (s *Store) Loaded() (snapshot string, replayed uint64, refused []string) {
	op := s.hist.Opened
	for _, r := range op.Rejected {
		refused = append(refused, r.Name+": "+r.Reason)
	}
	return op.Snapshot, op.Replayed, refused
}

// KeepHistory makes the store's snapshots while ctx lasts (package
// journal/history: one every Options.SnapshotEvery records, checked each
// tick), dropping from the state what each covers; the running host runs
// it. It returns when ctx is done or the snapshots stop (the error).
func (s *Store) KeepHistory(ctx context.Context, tick time.Duration) error {
	return s.hist.Keeper.Run(ctx, tick, s.forget)
}

// SigningKey is the operator key's Ed25519 half, which signs the running
// host's frames as it signs receipts; nil on a read-only store.
func (s *Store) SigningKey() *wire.SigningKey {
	if s.key == nil {
		return nil
	}
	return s.key.Ed25519()
}

// JournalFailed is closed once the journal has stopped for good: a failed
// fdatasync (what is on disk is unknown), or a receipt record that was not
// written (no later receipt may land). Every later append is refused.
func (s *Store) JournalFailed() <-chan struct{} { return s.j.Failed() }

// JournalFailure says why the journal stopped for good; "" while it is
// sound.
func (s *Store) JournalFailure() string { return s.j.Summary().Failure }

// Health reports why the store can no longer serve, or nil: a journal
// stopped for good refuses every later append, so every dispatch, settle
// and administrative change would be refused. It is cheap (a copy of the
// journal's summary) and feeds systemd's watchdog, which restarts the
// host when it fails.
func (s *Store) Health() error {
	if f := s.JournalFailure(); f != "" {
		return fmt.Errorf("host journal %s failed: %s", filepath.Join(s.dir, hostlog.JournalDir), f)
	}
	return nil
}

// append writes one record, refusing on a read-only store, and returns
// where it is.
func (s *Store) append(kind string, body any) (journal.Place, error) {
	if s.readOnly {
		return journal.Place{}, fmt.Errorf("store %s is open read-only", s.dir)
	}
	return s.j.AppendAt(kind, body)
}

// release returns an attempt's reservation to its purse and its daily count.
func (st *state) release(a *attempt) {
	if c := st.Controllers[a.Controller]; c != nil {
		c.Purse.Charged -= a.Charge
	}
	if g := st.Grants[a.Grant]; g != nil && g.Day == a.Day && g.Count > 0 {
		g.Count--
	}
	st.agentUnhold(a.ID, a.Controller, a.Agent, a.Conversation, a.Day, a.Charge)
}

// use counts one admitted request on UTC day d. A day earlier than the
// latest one counted (a clock set back) counts on the latest: the count
// never goes back to a day it has left, so it never refills.
func (g *grant) use(d int64) {
	if d > g.Day {
		g.Day, g.Count = d, 0
	}
	g.Count++
}

// usedOn reports the grant's count on UTC day d: the latest day's count for
// any day up to it (see use), 0 for a later day.
func (g *grant) usedOn(d int64) uint64 {
	if d > g.Day {
		return 0
	}
	return g.Count
}

// utcDay is the UTC day number of t: unix ms / 86,400,000.
func utcDay(t time.Time) int64 { return t.UnixMilli() / msPerDay }

// msPerDay is a UTC day in unix ms: the length every daily count of the
// store rolls by.
const msPerDay = 86_400_000
