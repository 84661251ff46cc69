package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// DefaultEvery is how many records a snapshot is made after, when
// Options.Every is 0: about 2,500 calls of the host's, whose ended items
// are what the live state holds at most beyond what is under way.
const DefaultEvery = 10_000

// CoversMeta is the index meta key of the last mark the index was synced
// with (its seq, 8 bytes big-endian): a snapshot past it is not used,
// since what ended before its mark may be missing from the index.
const CoversMeta = "history-covers"

// State is an owner's derived state and its replayer (see the package
// documentation for what it keeps).
type State interface {
	// Apply applies one verified journal record, every record after the
	// state's mark in order, the journal's bind and rebind records too.
	Apply(r journal.Record) error
	// Encode is the state as a snapshot holds it, deterministic.
	Encode() ([]byte, error)
}

// Options says what Open opens. Journal, Snapshots, Format, New and
// Decode are required.
type Options struct {
	// Journal is the journal's directory and JournalOptions its options
	// but From and OnRecord, which are the keeper's.
	Journal        string
	JournalOptions journal.Options
	// Snapshots is the directory of the owner's snapshots (the owner's
	// alone, see journal/snapshot), Format and Version their format.
	Snapshots string
	Format    string
	Version   uint64
	// Index is the history index the owner's states put what ended into;
	// nil for an owner without one and for a read-only open.
	Index *index.Index
	// New is an empty state, for a full replay; Decode a state from a
	// snapshot (its Version says which encoding State is).
	New    func() (State, error)
	Decode func(snapshot.Snapshot) (State, error)
	// Sign signs a snapshot's digest, nil for unsigned snapshots; Verify
	// checks a snapshot's signature (sig nil when it has none), nil to
	// refuse every signed snapshot (journal/snapshot.Load).
	Sign   func(digest []byte) ([]byte, error)
	Verify func(s snapshot.Snapshot, digest, sig []byte) error
	// Every is how many records a snapshot is made after (DefaultEvery
	// when 0).
	Every uint64
	// ReadOnly opens the journal read-only and writes nothing.
	ReadOnly bool
	// FullReplay ignores the snapshots and replays every record: for a
	// reader without the index the snapshots rely on (what ended before
	// a snapshot's mark is in the index, not in the snapshot).
	FullReplay bool
	// Logger receives the keeper's reports; slog.Default() when nil.
	Logger *slog.Logger
}

// Opened is what Open found and did.
type Opened struct {
	// Journal is the open journal, State the live state: the snapshot's
	// and every record after it (every record, after a full replay).
	Journal *journal.Journal
	State   State
	// Snapshot is the file loaded ("" after a full replay), From its mark.
	Snapshot string
	From     journal.Mark
	// Rejected are the snapshots tried and refused, newest first, each
	// with why; Cleaned the temporaries of interrupted writes removed.
	Rejected []snapshot.Rejected
	Cleaned  []string
	// Replayed is how many records were applied after the snapshot.
	Replayed uint64
	// Wrote is the snapshot Open wrote after a long replay, "" if none.
	Wrote string
}

// Keeper makes an open journal's snapshots. Its methods are safe for
// concurrent use; one snapshot is made at a time.
type Keeper struct {
	o   Options
	j   *journal.Journal
	log *slog.Logger

	// mu guards the fields that follow; it is held for a whole snapshot,
	// so that snapshots are made one at a time, in mark order.
	mu      sync.Mutex
	replica State
	at      uint64 // the replica's mark: the last record applied to it
	// base is the replica's encoding at baseMark, the last snapshot
	// written (or the open): what the replica is made again from when an
	// index write fails inside an Apply and leaves it half applied.
	base     []byte
	baseMark journal.Mark
	snapAt   uint64       // the mark of the last snapshot written or loaded
	last     journal.Mark // that mark whole (zero when there was none)
	failed   error        // a record the replica refused: no more snapshots
	closed   bool
	// refused are the snapshots the open refused, name -> why: one of a
	// mark a new snapshot is written at is set aside first.
	refused map[string]string
}

// Open opens the journal from the newest snapshot it can use, or from its
// beginning, as the package documentation says. On error nothing is open.
func Open(o Options) (*Keeper, Opened, error) {
	if err := o.check(); err != nil {
		return nil, Opened{}, err
	}
	if o.Every == 0 {
		o.Every = DefaultEvery
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	op, err := o.open()
	if err != nil {
		return nil, op, err
	}
	k := &Keeper{o: o, j: op.Journal, log: o.Logger, snapAt: op.From.Seq, last: op.From, refused: map[string]string{}}
	for _, r := range op.Rejected {
		k.refused[r.Name] = r.Reason
	}
	if err := k.start(&op); err != nil {
		op.Journal.Close()
		return nil, Opened{Rejected: op.Rejected, Cleaned: op.Cleaned}, err
	}
	return k, op, nil
}

func (o *Options) check() error {
	switch {
	case o.Journal == "":
		return errors.New("history: no journal directory")
	case o.Snapshots == "":
		return errors.New("history: no snapshot directory")
	case o.Format == "":
		return errors.New("history: no snapshot format")
	case o.New == nil || o.Decode == nil:
		return errors.New("history: no state constructor (New and Decode)")
	case o.JournalOptions.From != nil || o.JournalOptions.OnRecord != nil:
		return errors.New("history: JournalOptions.From and OnRecord are the keeper's")
	}
	return nil
}

// open is Open's loading: the newest snapshot the journal accepts, else a
// full replay.
func (o *Options) open() (Opened, error) {
	var op Opened
	covers, err := o.covers()
	if err != nil {
		return op, err
	}
	// fatal is a journal error no snapshot causes (its lock held, its
	// binding another config, a damaged segment): Open fails with it at
	// once rather than trying every snapshot and a full replay for it.
	var fatal error
	if o.FullReplay {
		return o.fullReplay(op)
	}
	accept := func(s snapshot.Snapshot) error {
		if fatal != nil {
			return fatal
		}
		if o.Index != nil && !o.ReadOnly && s.Mark.Seq > covers {
			return fmt.Errorf("%w: the history index covers records up to %d, the snapshot %d", ErrIndexBehind, covers, s.Mark.Seq)
		}
		st, err := o.Decode(s)
		if err != nil {
			return fmt.Errorf("its state: %w", err)
		}
		j, n, err := o.openJournal(&s.Mark, st)
		var refused *stateRefusal
		switch {
		case err == nil:
		case errors.Is(err, journal.ErrMarkMismatch), errors.As(err, &refused):
			return err
		default:
			fatal = err
			return err
		}
		op.Journal, op.State, op.Replayed = j, st, n
		return nil
	}
	l, err := snapshot.Load(o.Snapshots, o.Format, o.Verify, accept)
	op.Rejected, op.Cleaned = l.Rejected, l.Cleaned
	switch {
	case fatal != nil:
		return op, fatal
	case err == nil:
		op.Snapshot, op.From = l.Name, l.Mark
		return op, nil
	case !errors.Is(err, snapshot.ErrNoSnapshot):
		return op, err
	}
	return o.fullReplay(op)
}

// fullReplay opens the journal from its first record onto New's state.
func (o *Options) fullReplay(op Opened) (Opened, error) {
	st, err := o.New()
	if err != nil {
		return op, fmt.Errorf("history: an empty state: %w", err)
	}
	j, n, err := o.openJournal(nil, st)
	if err != nil {
		return op, err
	}
	op.Journal, op.State, op.Replayed = j, st, n
	return op, nil
}

// openJournal opens the journal from mark (nil: from its first record),
// applying every record after it to st.
func (o *Options) openJournal(mark *journal.Mark, st State) (*journal.Journal, uint64, error) {
	jo := o.JournalOptions
	jo.ReadOnly = jo.ReadOnly || o.ReadOnly
	// A replay from record 1 goes through the archives of a journal
	// whose first records were archived (where its base says each was
	// made): the state is rebuilt from everything, not refused.
	jo.From, jo.ReplayArchives = mark, mark == nil
	var n uint64
	jo.OnRecord = func(r journal.Record) error {
		n++
		if err := st.Apply(r); err != nil {
			return &stateRefusal{err}
		}
		return nil
	}
	j, err := journal.Open(o.Journal, jo)
	if err != nil || mark != nil || n == j.LastSeq() {
		return j, n, err
	}
	// A journal Open created has records it verified none of (its bind
	// record): the state sees them as a later full replay will.
	err = j.Iterate(n+1, func(r journal.Record) error {
		n++
		return st.Apply(r)
	})
	if err != nil {
		j.Close()
		return nil, 0, &stateRefusal{err}
	}
	return j, n, nil
}

// covers is the seq the index says it covers (0 without an index or a
// mark recorded).
func (o *Options) covers() (uint64, error) {
	if o.Index == nil || o.ReadOnly {
		return 0, nil
	}
	b, ok, err := o.Index.Meta(CoversMeta)
	if err != nil || !ok {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("history: the index's %s is %d bytes, not 8", CoversMeta, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// start makes the replica of the state Open built and, after a long
// replay, the first snapshot.
func (k *Keeper) start(op *Opened) error {
	b, err := op.State.Encode()
	if err != nil {
		return fmt.Errorf("history: encoding the state: %w", err)
	}
	m := k.j.Mark()
	if k.replica, err = k.o.Decode(snapshot.Snapshot{Format: k.o.Format, Version: k.o.Version, Mark: m, State: b}); err != nil {
		return fmt.Errorf("history: the state's own encoding does not decode: %w", err)
	}
	k.at, k.base, k.baseMark = m.Seq, b, m
	if k.o.ReadOnly || op.Replayed < k.o.Every || m.Seq == 0 {
		return nil
	}
	name, err := k.write(m, b)
	if err != nil {
		// The journal is open and the state is right: the next snapshot
		// is due at the next tick.
		k.log.Error("history: no snapshot after a long replay", "records", op.Replayed, "err", err)
		return nil
	}
	op.Wrote = name
	return nil
}
