package appliance

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
	"golang.org/x/sys/unix"
)

// The state directory holds the journal, the snapshots and the history
// index, each in a directory of mode 0700 of its own.
func journalDir(state string) string  { return filepath.Join(state, "journal") }
func snapshotDir(state string) string { return filepath.Join(state, "snapshots") }
func indexPath(state string) string   { return filepath.Join(state, "index", "answers.db") }

// snapshotTick is how often the keeper looks whether a snapshot is due.
const snapshotTick = time.Second

// maxAside bounds the damaged index files kept beside the index: past
// it a start is refused rather than deleting one.
const maxAside = 100

// store is the appliance's history: the keeper of the journal and its
// snapshots, the history index and the ledger deciding invocations.
type store struct {
	k      *history.Keeper
	j      *journal.Journal
	x      *index.Index
	led    *ledger
	faults *faults
	// opened is the state the open rebuilt (its counters; the answers
	// are in x).
	opened *replayState
	stop   context.CancelFunc
	ran    chan struct{} // closed when the keeper's Run returned
}

// historyOptions are the keeper's options for the appliance's state
// directory. x is the index (nil for a read-only open); faults receives
// the states' index failures.
func historyOptions(cfg Config, x *index.Index, f *faults, log *slog.Logger) history.Options {
	where := journalDir(cfg.State)
	var report func(error)
	if f != nil {
		report = f.report
	}
	return history.Options{
		Journal: where,
		JournalOptions: journal.Options{Owner: journalOwner, Format: journalFormat, Config: journalConfig, Logger: log,
			SegmentSize: cfg.JournalSegmentSize},
		Snapshots: snapshotDir(cfg.State), Format: stateFormat, Version: stateVersion,
		Index: x,
		New:   func() (history.State, error) { return newReplayState(x, where, report), nil },
		Decode: func(s snapshot.Snapshot) (history.State, error) {
			return decodeReplayState(s, x, where, report)
		},
		// Unsigned (Sign and Verify nil: a signed snapshot is not the
		// appliance's, and is refused): the appliance holds no key, and
		// its state decides nothing the journal does not (DESIGN.md
		// section 13).
		Every:  cfg.SnapshotEvery,
		Logger: log,
	}
}

// openStore opens the history: the index, then the journal from the
// newest snapshot it can use. A damaged index is reported, set aside and
// rebuilt by a full replay.
func openStore(cfg Config, log *slog.Logger) (*store, error) {
	s, err := tryOpenStore(cfg, log)
	if !errors.Is(err, index.ErrDamaged) {
		return s, err
	}
	log.Error("the history index is damaged; setting it aside and rebuilding it from the journal", "err", err)
	if err := setAside(indexPath(cfg.State), log); err != nil {
		return nil, err
	}
	return tryOpenStore(cfg, log)
}

func tryOpenStore(cfg Config, log *slog.Logger) (*store, error) {
	x, err := index.Open(indexPath(cfg.State), index.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("history index: %w", err)
	}
	f := newFaults()
	k, op, err := history.Open(historyOptions(cfg, x, f, log))
	reportOpened(log, op)
	if err != nil {
		x.Close()
		return nil, err
	}
	st := op.State.(*replayState)
	log.Info("history opened", "snapshot", op.Snapshot, "from", op.From.Seq, "replayed", op.Replayed,
		"wrote", op.Wrote, "records", st.Seq, "answers", st.Answers)
	return &store{k: k, j: k.Journal(), x: x, faults: f, opened: st, led: newLedger(k.Journal(), x, f, st.Answers)}, nil
}

// reportOpened logs every snapshot history.Open refused, and every
// interrupted write it removed, by name and why.
func reportOpened(log *slog.Logger, op history.Opened) {
	for _, r := range op.Rejected {
		log.Warn("snapshot refused", "snapshot", r.Name, "reason", r.Reason)
	}
	for _, c := range op.Cleaned {
		log.Warn("removed an interrupted snapshot write", "file", c)
	}
}

// run makes snapshots in the background until close: after each, the
// ledger forgets the answers the index now holds.
func (s *store) run(log *slog.Logger) {
	ctx, stop := context.WithCancel(context.Background())
	s.stop, s.ran = stop, make(chan struct{})
	go func() {
		defer close(s.ran)
		if err := s.k.Run(ctx, snapshotTick, s.led.forget); err != nil {
			log.Error("snapshots stopped; the journal stays the truth, and the answers since the last snapshot stay in memory", "err", err)
		}
	}()
}

// snapshot makes a snapshot now, as Run does when one is due.
func (s *store) snapshot() (journal.Mark, error) {
	m, name, err := s.k.Snapshot()
	if err == nil && name != "" {
		s.led.forget(m)
	}
	return m, err
}

// close stops the snapshots, makes the last one and closes the journal,
// then the index.
func (s *store) close() error {
	if s.stop != nil {
		s.stop()
		<-s.ran
	}
	kerr := s.k.Close()
	xerr := s.x.Close()
	if errors.Is(xerr, index.ErrClosed) {
		xerr = nil
	}
	return errors.Join(kerr, xerr)
}

// setAside renames the index file at path and its marker out of the way,
// never deleting them: NAME.damaged, or NAME.N.damaged when that is
// taken; a start after it builds a new index from the journal.
func setAside(path string, log *slog.Logger) error {
	for _, p := range []string{path, path + index.MarkerSuffix} {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		to, err := renameAside(p)
		if err != nil {
			return fmt.Errorf("setting the damaged history index aside: %w", err)
		}
		log.Error("the damaged history index was set aside, kept as evidence", "file", p, "now", to)
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("setting the damaged history index aside: %w", err)
	}
	return nil
}

func renameAside(p string) (string, error) {
	for n := 1; n <= maxAside; n++ {
		to := p + ".damaged"
		if n > 1 {
			to = fmt.Sprintf("%s.%d.damaged", p, n)
		}
		err := unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", &os.LinkError{Op: "rename", Old: p, New: to, Err: err}
		}
		return to, nil
	}
	return "", fmt.Errorf("%s: %d damaged copies are kept beside it already; remove some", p, maxAside)
}
