package hosthist

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"golang.org/x/sys/unix"
)

// Where a store keeps its history.
const (
	SnapshotDir = "snapshots"
	IndexFile   = "index/history.db"
)

// StateFormat and StateVersion name the encoding of the host's state in
// a snapshot and of the values in its index: a change of what a field
// means, or of the fields, is a new version (before any release, the
// format is changed in place).
const (
	StateFormat  = "steward-host-state"
	StateVersion = 1
)

// readerLockWait bounds how long a read-only open waits for the index's
// shared lock: a running host holds it for good, so one that is held at
// once is held.
const readerLockWait = 50 * time.Millisecond

// decMode decodes snapshots and index values strictly: larger bounds than
// a journal record's (a state holds every live attempt and ask), still
// finite.
var decMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		IndefLength:       cbor.IndefLengthForbidden,
		MaxNestedLevels:   16,
		MaxArrayElements:  1 << 24,
		MaxMapPairs:       1 << 24,
	}.DecMode()
	if err != nil {
		panic("hosthist: decoding options: " + err.Error())
	}
	return m
}()

// Decode decodes a snapshot's state or an index value into v, strictly.
func Decode(b []byte, v any) error { return decMode.Unmarshal(b, v) }

// Options says which store Open opens and how its state is rebuilt.
type Options struct {
	// Dir is the store, Pub its operator key (the journal's binding, and
	// what a snapshot's signature is checked with) and Key the signing
	// key, nil to open read-only.
	Dir string
	Pub *wire.HybridPublicKey
	Key *wire.HybridSigningKey
	// New is an empty state and Decode one from a snapshot's state
	// bytes, each putting what ends into the index x (nil: keeping it).
	New    func(x *Index) history.State
	Decode func(x *Index, b []byte) (history.State, error)
	// Every is the keeper's snapshot interval (history.DefaultEvery when
	// 0); SegmentSize the segment size of a journal Open creates.
	Every       uint64
	SegmentSize int64
	Logger      *slog.Logger
}

// Opened is an open store's journal, state and history.
type Opened struct {
	Keeper *history.Keeper
	State  history.State
	Index  *Index // nil when the store has none (read-only)
	// Opened reports what history.Open loaded, refused and replayed.
	Opened history.Opened
}

// Journal is the open journal.
func (o Opened) Journal() *journal.Journal { return o.Keeper.Journal() }

// Close closes the keeper (a last snapshot) and then the index.
func (o Opened) Close() error {
	err := o.Keeper.Close()
	if cerr := o.Index.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Open opens the store's journal from its newest usable snapshot, or
// from its first record, logging every snapshot refused and why. Read-
// write, a damaged index is set aside (renamed, never removed) and the
// index rebuilt by the full replay that an empty index forces. Read-only,
// the index is opened read-only when no host holds it (then its snapshots
// are used), is held (the host runs: Index reports ErrHeld), or is absent
// (the state is a full replay, nothing in the index).
func Open(o Options) (Opened, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	x, err := openIndex(o)
	if err != nil {
		return Opened{}, err
	}
	ro := o.Key == nil
	jo := hostlog.Options(o.Pub)
	jo.ReadOnly, jo.SegmentSize, jo.Logger = ro, o.SegmentSize, o.Logger
	ho := history.Options{
		Journal: filepath.Join(o.Dir, hostlog.JournalDir), JournalOptions: jo,
		Snapshots: filepath.Join(o.Dir, SnapshotDir), Format: StateFormat, Version: StateVersion,
		New: func() (history.State, error) { return o.New(x), nil },
		Decode: func(s snapshot.Snapshot) (history.State, error) {
			if s.Version != StateVersion {
				return nil, fmt.Errorf("state version %d, not %d", s.Version, StateVersion)
			}
			return o.Decode(x, s.State)
		},
		Verify: verifier(o.Pub), Every: o.Every, ReadOnly: ro, FullReplay: x == nil, Logger: o.Logger,
	}
	if x != nil {
		ho.Index = x.x
	}
	if !ro {
		ho.Sign = func(digest []byte) ([]byte, error) { return wire.SignHybrid(o.Key, digest) }
	}
	k, op, err := history.Open(ho)
	for _, r := range op.Rejected {
		o.Logger.Warn("steward-operator: a snapshot was refused", "snapshot", filepath.Join(ho.Snapshots, r.Name), "reason", r.Reason)
	}
	if err != nil {
		x.Close()
		return Opened{}, err
	}
	o.Logger.Debug("steward-operator: state loaded", "snapshot", op.Snapshot, "replayed", op.Replayed, "wrote", op.Wrote)
	return Opened{Keeper: k, State: op.State, Index: x, Opened: op}, nil
}

// verifier checks a snapshot's signature: the operator key's, over its
// digest. An unsigned snapshot is refused.
func verifier(pub *wire.HybridPublicKey) func(snapshot.Snapshot, []byte, []byte) error {
	return func(_ snapshot.Snapshot, digest, sig []byte) error {
		if sig == nil {
			return errors.New("it is not signed")
		}
		payload, err := wire.VerifyHybrid(sig, pub)
		if err != nil {
			return fmt.Errorf("its signature: %w", err)
		}
		if !bytes.Equal(payload, digest) {
			return errors.New("its signature is over another digest")
		}
		return nil
	}
}

// openIndex opens the store's index as Open says.
func openIndex(o Options) (*Index, error) {
	path := filepath.Join(o.Dir, IndexFile)
	if o.Key == nil {
		if heldExclusive(path) {
			return &Index{readOnly: true}, nil // the host runs
		}
		x, err := index.Open(path, index.Options{ReadOnly: true, LockTimeout: readerLockWait, Logger: o.Logger})
		switch {
		case err == nil:
			return &Index{x: x, readOnly: true}, nil
		case errors.Is(err, index.ErrLocked):
			return &Index{readOnly: true}, nil
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil
		}
		return nil, err
	}
	x, err := openOwner(path, o.Logger)
	if errors.Is(err, index.ErrDamaged) {
		aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().Unix())
		o.Logger.Error("steward-operator: the history index is damaged; it is set aside and rebuilt from the journal",
			"index", path, "setAside", aside, "err", err)
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("%w; setting it aside: %v", err, rerr)
		}
		os.Rename(path+index.MarkerSuffix, aside+index.MarkerSuffix) // absent unless unsynced
		x, err = openOwner(path, o.Logger)
	}
	if err != nil {
		return nil, err
	}
	return &Index{x: x}, nil
}

// openOwner opens the index for writing. The file's lock held exclusive
// is the running host: that is journal.ErrLocked at once, as the
// journal's own lock says (a command that finds it so goes through the
// host's admin socket). Held shared, it is a reader's (a read-only
// command), waited for up to the index's lock timeout.
func openOwner(path string, log *slog.Logger) (*index.Index, error) {
	x, err := index.Open(path, index.Options{LockTimeout: time.Nanosecond, Logger: log})
	if !errors.Is(err, index.ErrLocked) {
		return x, err
	}
	if heldExclusive(path) {
		return nil, fmt.Errorf("store %s is open by its host (its history index is held): %w", filepath.Dir(filepath.Dir(path)), journal.ErrLocked)
	}
	return index.Open(path, index.Options{Logger: log})
}

// heldExclusive reports whether another opener holds the file's lock
// exclusive now. It takes a shared lock for the time of two system calls.
func heldExclusive(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// Init makes a new store's empty history index, so that a store is built
// whole at init (its first open then needs no room on a full disk).
func Init(dir string) error {
	x, err := index.Open(filepath.Join(dir, IndexFile), index.Options{})
	if err != nil {
		return err
	}
	return x.Close()
}

// OpenIndex opens the history index of the store in dir for writing, as
// Open does (a damaged one is an error here, not set aside): for a tool
// or a test that replays a journal into it itself.
func OpenIndex(dir string) (*Index, error) {
	x, err := index.Open(filepath.Join(dir, IndexFile), index.Options{})
	if err != nil {
		return nil, err
	}
	return &Index{x: x}, nil
}

// Close closes the index (a nil or held one: nothing to close).
func (h *Index) Close() error {
	if h == nil || h.x == nil {
		return nil
	}
	return h.x.Close()
}
