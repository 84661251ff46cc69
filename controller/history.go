package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// The controller's history (DESIGN.md section 13): its journal opened from
// the newest snapshot of its ledger that verifies and that the journal
// and the history index accept, the records after it replayed (each
// decoded once, during the journal's verifying scan), and the requestIds
// that ended kept in the index on disk, not in memory.

// DamagedSuffix is appended to the name of a history index found damaged
// when it is moved aside: evidence, never deleted, while a new index is
// rebuilt from the journal.
const DamagedSuffix = ".damaged"

// IndexPath is the controller's history index: index/history.db in its
// state directory, beside the journal and the snapshots.
func IndexPath(cfg *Config) string { return filepath.Join(cfg.StateDir, "index", "history.db") }

// historyOpts tune openHistory.
type historyOpts struct {
	segmentSize int64  // of a journal it creates; the journal's default when 0
	every       uint64 // records between snapshots; history.DefaultEvery when 0
	// lockTimeout bounds the wait for the index's lock (the daemon holds
	// it): index.DefaultLockTimeout when 0.
	lockTimeout time.Duration
	hooks       *historyHooks
}

// historyHooks are what the package's tests watch of the history: what
// history.Open did (before anything is served), and each snapshot Run
// made with how many requestIds left memory after it.
type historyHooks struct {
	opened      func(history.Opened)
	snapshotted func(m journal.Mark, forgotten int)
}

// opened is the controller's journal opened through its history.
type opened struct {
	keeper *history.Keeper
	led    *ledger.Ledger
	idx    *index.Index
	// watch is what the ledgers (the live one and the keeper's replica)
	// reach the index through: it sees the index stop for good.
	watch *indexWatch
}

// indexWatch is the ledgers' history index, which notices the index
// stopping for good: a failed sync (index.ErrFailed) or damage found
// (index.ErrDamaged); a failed write (a full disk, index.ErrWrite) keeps
// its entries and is not that. Every later lookup would fail, and so
// would every call: the daemon exits non-zero instead (Serve), so that a
// restart reopens the index, or sets a damaged one aside, and replays the
// journal into it.
type indexWatch struct {
	x      *index.Index
	once   sync.Once
	failed chan struct{} // closed when the index has stopped
	err    error         // why; set before failed is closed
}

func newIndexWatch(x *index.Index) *indexWatch {
	return &indexWatch{x: x, failed: make(chan struct{})}
}

// Get is the index's Get.
func (w *indexWatch) Get(bucket string, key []byte) ([]byte, bool, error) {
	v, ok, err := w.x.Get(bucket, key)
	return v, ok, w.saw(err)
}

// Put is the index's Put.
func (w *indexWatch) Put(bucket string, key, value []byte) error {
	return w.saw(w.x.Put(bucket, key, value))
}

// saw notes err when it says the index stopped for good, and returns it.
func (w *indexWatch) saw(err error) error {
	if errors.Is(err, index.ErrFailed) || errors.Is(err, index.ErrDamaged) {
		w.once.Do(func() {
			w.err = err
			close(w.failed)
		})
	}
	return err
}

// stopped is closed once the index has stopped for good; Err says why.
func (w *indexWatch) stopped() <-chan struct{} { return w.failed }

// Err is why the index stopped, once stopped is closed.
func (w *indexWatch) Err() error {
	select {
	case <-w.failed:
		return w.err
	default:
		return nil
	}
}

// openHistory opens the index, moving a damaged one aside, and the
// journal through history.Open, logging what it loaded, replayed and
// refused. On error nothing is open.
func openHistory(cfg *Config, raw []byte, log *slog.Logger, o historyOpts) (*opened, error) {
	canon, err := canonjson.CanonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("controller journal: config for %s: %w", cfg.JournalDir(), err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("controller state: %w", err)
	}
	idx, err := openIndex(IndexPath(cfg), log, o.lockTimeout)
	if err != nil {
		return nil, err
	}
	jo := journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: canon, SegmentSize: o.segmentSize, Logger: log}
	t0 := time.Now()
	watch := newIndexWatch(idx)
	k, op, err := history.Open(historyOptions(cfg.JournalDir(), jo, idx, watch, o.every, log))
	logOpened(log, op, err, time.Since(t0))
	if err == nil && o.hooks != nil && o.hooks.opened != nil {
		o.hooks.opened(op)
	}
	if err != nil {
		idx.Close()
		if errors.Is(err, journal.ErrBindingMismatch) {
			return nil, bindingError(cfg.JournalDir(), canon)
		}
		return nil, fmt.Errorf("controller journal: %w", err)
	}
	return &opened{keeper: k, led: op.State.(*ledger.Ledger), idx: idx, watch: watch}, nil
}

// historyOptions are history.Open's options for the controller journal in
// dir: with idx (read-write), which the ledgers reach through watch, or
// without one (nil: read-only).
func historyOptions(dir string, jo journal.Options, idx *index.Index, watch *indexWatch, every uint64, log *slog.Logger) history.Options {
	o := history.Options{
		Journal: dir, JournalOptions: jo,
		Snapshots: ledger.SnapshotDir(dir), Format: ledger.StateFormat, Version: ledger.StateVersion,
		Every: every, Logger: log, ReadOnly: idx == nil,
	}
	if idx == nil {
		// Read to be shown, not to decide calls: the requestIds that
		// ended are not kept (ledger.Discard()).
		o.New = func() (history.State, error) { return ledger.NewIndexed(ledger.Discard()), nil }
		o.Decode = func(s snapshot.Snapshot) (history.State, error) {
			return ledger.DecodeState(s.Version, s.State, ledger.Discard())
		}
		return o
	}
	o.Index = idx
	o.New = func() (history.State, error) { return ledger.NewIndexed(watch), nil }
	o.Decode = func(s snapshot.Snapshot) (history.State, error) { return ledger.DecodeState(s.Version, s.State, watch) }
	return o
}

// logOpened reports what history.Open did: every snapshot refused (by
// name, and why), what it loaded and how many records it replayed.
func logOpened(log *slog.Logger, op history.Opened, err error, took time.Duration) {
	for _, r := range op.Rejected {
		log.Warn("controller history: snapshot refused", "snapshot", r.Name, "reason", r.Reason)
	}
	for _, c := range op.Cleaned {
		log.Warn("controller history: removed the temporary of an interrupted snapshot write", "file", c)
	}
	if err != nil {
		return
	}
	if op.Snapshot == "" {
		log.Info("controller history: no snapshot used; replayed the whole journal", "records", op.Replayed, "took", took)
	} else {
		log.Info("controller history: loaded a snapshot", "snapshot", op.Snapshot, "seq", op.From.Seq, "replayed", op.Replayed, "took", took)
	}
	if op.Wrote != "" {
		log.Info("controller history: wrote a snapshot after the replay", "snapshot", op.Wrote)
	}
}

// openIndex opens the history index at path. A damaged one is reported
// loudly and moved aside (path+DamagedSuffix, its marker too), never
// removed, and a new empty index is made: history.Open then finds it
// covering nothing and replays the whole journal into it.
func openIndex(path string, log *slog.Logger, lockTimeout time.Duration) (*index.Index, error) {
	x, err := index.Open(path, index.Options{Logger: log, LockTimeout: lockTimeout})
	if err == nil {
		return x, nil
	}
	if !errors.Is(err, index.ErrDamaged) {
		return nil, fmt.Errorf("controller history index: %w", err)
	}
	aside, merr := moveAside(path)
	if merr != nil {
		return nil, fmt.Errorf("controller history index: %v; moving it aside failed: %w", err, merr)
	}
	if _, serr := os.Lstat(path + index.MarkerSuffix); serr == nil {
		if _, merr := moveAside(path + index.MarkerSuffix); merr != nil {
			return nil, fmt.Errorf("controller history index: %v; moving its marker aside failed: %w", err, merr)
		}
	}
	log.Error("controller history index DAMAGED: moved aside as evidence; rebuilding it from the journal (a full replay)",
		"index", path, "movedTo", aside, "err", err)
	x, err = index.Open(path, index.Options{Logger: log, LockTimeout: lockTimeout})
	if err != nil {
		return nil, fmt.Errorf("controller history index, made anew after the damaged one was moved aside: %w", err)
	}
	return x, nil
}

// moveAside renames path to path+DamagedSuffix, or with a number after it
// when that exists: earlier evidence is never replaced.
func moveAside(path string) (string, error) {
	for i := 0; i < 1000; i++ {
		to := path + DamagedSuffix
		if i > 0 {
			to += "." + strconv.Itoa(i)
		}
		if _, err := os.Lstat(to); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Rename(path, to); err != nil {
			return "", err
		}
		return to, syncDir(filepath.Dir(path))
	}
	return "", fmt.Errorf("%s%s.1 to .999 all exist", path, DamagedSuffix)
}

// syncDir fsyncs a directory: the rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openReadOnly opens the controller journal in dir through its history,
// read-only and without the index (a running daemon holds its lock): the
// newest snapshot the journal accepts and the durable records after it,
// nothing written. It is what the read-only commands read; a snapshot it
// refuses is logged (log nil: slog.Default()), and it goes on from an
// older one or from the first record.
func openReadOnly(dir string, log *slog.Logger) (*history.Keeper, *ledger.Ledger, error) {
	if log == nil {
		log = slog.Default()
	}
	k, op, err := history.Open(historyOptions(dir, journal.Options{ReadOnly: true}, nil, nil, 0, log))
	for _, r := range op.Rejected {
		log.Warn("controller history: snapshot refused", "snapshot", r.Name, "reason", r.Reason)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("controller journal: %w", err)
	}
	return k, op.State.(*ledger.Ledger), nil
}
