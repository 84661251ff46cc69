package history

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/journal/snapshot"
)

// FailAfterIndexSync is the failpoint between the index's sync with a
// mark and the snapshot's write: the index is then ahead of the newest
// snapshot, and the replay after it meets items the index already holds.
const FailAfterIndexSync = "history-after-index-sync"

// errPast stops an iteration at the mark a snapshot is made at.
var errPast = errors.New("past the mark")

// Journal is the journal Open opened.
func (k *Keeper) Journal() *journal.Journal { return k.j }

// Due reports whether a snapshot is due: Options.Every durable records or
// more since the last one.
func (k *Keeper) Due() bool {
	m := k.j.Mark()
	k.mu.Lock()
	defer k.mu.Unlock()
	return m.Seq >= k.snapAt+k.o.Every
}

// LastMark is the mark of the last snapshot written or loaded: the zero
// Mark when there is none (a full replay, and none made since).
func (k *Keeper) LastMark() journal.Mark {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

// Archive moves the journal's segments wholly before mark m into the new
// archive directory dir (journal.Archive). m must be a snapshot's mark at
// or before the newest one's, so that the next start loads a snapshot the
// archive leaves whole; one past it (or with no snapshot yet) is refused
// with an error matching ErrPastSnapshot, in words an owner can show as
// its refusal, and changes nothing. journal.RefusedArchive tells the journal's own
// refusals from its failures.
func (k *Keeper) Archive(dir string, m journal.Mark) (journal.Archived, error) {
	if last := k.LastMark(); last.Seq == 0 || m.Seq > last.Seq {
		return journal.Archived{}, &pastSnapshot{m.Seq, last.Seq}
	}
	return k.j.Archive(dir, m)
}

// pastSnapshot is Archive's refusal of a mark past the newest snapshot's:
// it matches ErrPastSnapshot, and says it as the owner's refusal does.
type pastSnapshot struct{ seq, newest uint64 }

func (e *pastSnapshot) Error() string {
	return fmt.Sprintf("the mark at record %d is past the newest snapshot's (record %d): archive up to a snapshot's mark", e.seq, e.newest)
}

func (e *pastSnapshot) Unwrap() error { return ErrPastSnapshot }

// lastSnapshot is the mark seq of the last snapshot written or loaded.
func (k *Keeper) lastSnapshot() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.snapAt
}

// Err is why the keeper stopped making snapshots (ErrStopped and the
// record the replica refused), nil while it makes them.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed
}

// Snapshot brings the replica up to the journal's last durable record,
// syncs the index with that mark and writes the snapshot, returning its
// mark and file name. With nothing recorded since the last snapshot it
// writes none and returns the last snapshot's mark and "" (the zero Mark
// when there is none). On error no
// snapshot was written (the journal and the earlier snapshots are as they
// were); after ErrStopped none ever will be.
func (k *Keeper) Snapshot() (journal.Mark, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.o.ReadOnly:
		return journal.Mark{}, "", ErrReadOnly
	case k.closed:
		return journal.Mark{}, "", ErrClosed
	case k.failed != nil:
		return journal.Mark{}, "", k.failed
	}
	m := k.j.Mark()
	if m.Seq <= k.snapAt {
		return k.last, "", nil
	}
	if err := k.catchUp(m.Seq); err != nil {
		return journal.Mark{}, "", err
	}
	b, err := k.replica.Encode()
	if err != nil {
		return journal.Mark{}, "", fmt.Errorf("history: encoding the replica: %w", err)
	}
	name, err := k.write(m, b)
	if err != nil {
		return journal.Mark{}, "", err
	}
	return m, name, nil
}

// catchUp applies the records after the replica's mark up to seq to it;
// k.mu is held. A record the replica refuses stops the keeper.
func (k *Keeper) catchUp(seq uint64) error {
	if seq <= k.at {
		return nil
	}
	err := k.j.Iterate(k.at+1, func(r journal.Record) error {
		if r.Seq > seq {
			return errPast
		}
		if err := k.replica.Apply(r); err != nil {
			if errors.Is(err, index.ErrWrite) {
				return &indexWrite{fmt.Errorf("record %d (%s): %w", r.Seq, r.Kind, err)}
			}
			return &stateRefusal{fmt.Errorf("record %d (%s): %w", r.Seq, r.Kind, err)}
		}
		k.at = r.Seq
		return nil
	})
	var refused *stateRefusal
	var written *indexWrite
	switch {
	case err == nil, errors.Is(err, errPast):
	case errors.As(err, &written):
		return k.rebase(written.err)
	case errors.As(err, &refused):
		k.failed = fmt.Errorf("%w: the replica refused %w", ErrStopped, refused.err)
		k.log.Error("history: snapshots stopped", "err", k.failed)
		return k.failed
	default:
		return fmt.Errorf("history: reading the journal after record %d: %w", k.at, err)
	}
	if k.at != seq {
		return fmt.Errorf("history: the journal ended at record %d, before its mark %d", k.at, seq)
	}
	return nil
}

// indexWrite is an Apply that failed on the index's write (a full disk),
// not on the record: the replica may hold half of the record.
type indexWrite struct{ err error }

func (e *indexWrite) Error() string { return e.err.Error() }

// rebase makes the replica again from its base, the last snapshot's
// encoding, after an index write failed inside an Apply (err); k.mu is
// held. The next snapshot applies the records after the base again: the
// index's puts of the same records are the same entries.
func (k *Keeper) rebase(err error) error {
	st, derr := k.o.Decode(snapshot.Snapshot{Format: k.o.Format, Version: k.o.Version, Mark: k.baseMark, State: k.base})
	if derr != nil {
		k.failed = fmt.Errorf("%w: the replica could not be made again from record %d: %w", ErrStopped, k.baseMark.Seq, derr)
		k.log.Error("history: snapshots stopped", "err", k.failed)
		return k.failed
	}
	k.replica, k.at = st, k.baseMark.Seq
	return fmt.Errorf("history: the index could not take %w; the replica is made again from record %d and the snapshot tried when next due", err, k.baseMark.Seq)
}

// write syncs the index with mark m and writes state b as m's snapshot;
// k.mu is held (or the keeper not yet shared).
func (k *Keeper) write(m journal.Mark, b []byte) (string, error) {
	if x := k.o.Index; x != nil {
		var seq [8]byte
		binary.BigEndian.PutUint64(seq[:], m.Seq)
		if err := x.SetMeta(CoversMeta, seq[:]); err != nil {
			return "", fmt.Errorf("history: recording the index's mark: %w", err)
		}
		if err := x.Sync(); err != nil {
			return "", fmt.Errorf("history: syncing the index: %w", err)
		}
	}
	failpoint.Hit(FailAfterIndexSync)
	s := snapshot.Snapshot{Format: k.o.Format, Version: k.o.Version, Mark: m, State: b}
	w, err := snapshot.Write(k.o.Snapshots, s, k.o.Sign)
	if reason, ok := k.refused[snapshot.Name(m.Seq)]; ok && errors.Is(err, fs.ErrExist) {
		// The open refused the snapshot of this very mark (damaged, or
		// not this journal's): left in place, it would refuse every
		// snapshot of the mark, and every later start would replay from
		// an older one. It is kept beside, as evidence.
		aside, aerr := snapshot.SetAside(k.o.Snapshots, w.Name)
		if aerr != nil {
			return "", aerr
		}
		delete(k.refused, w.Name)
		k.log.Warn("history: a refused snapshot set aside for the new one of its mark", "snapshot", w.Name, "now", aside, "reason", reason)
		w, err = snapshot.Write(k.o.Snapshots, s, k.o.Sign)
	}
	for _, c := range w.Cleaned {
		k.log.Warn("history: removed an interrupted snapshot write", "file", c)
	}
	if err != nil {
		return "", err
	}
	k.snapAt, k.last, k.base, k.baseMark = m.Seq, m, b, m
	k.log.Debug("history: snapshot written", "snapshot", w.Name, "seq", m.Seq, "bytes", len(b), "removed", len(w.Removed))
	return w.Name, nil
}

// Run makes a snapshot whenever one is due, checking every tick, until ctx
// is done; after each, done (when not nil) is given its mark, for the
// owner to drop from its live state what ended up to it. A failed snapshot
// is logged and tried again when next due; Run returns when the keeper
// stops (ErrStopped), is closed or is read-only.
func (k *Keeper) Run(ctx context.Context, tick time.Duration, done func(journal.Mark)) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !k.Due() {
			continue
		}
		m, name, err := k.Snapshot()
		switch {
		case errors.Is(err, ErrStopped), errors.Is(err, ErrClosed), errors.Is(err, ErrReadOnly):
			return err
		case err != nil:
			k.log.Error("history: snapshot failed", "err", err)
		case name != "" && done != nil:
			done(m)
		}
	}
}

// Close makes a last snapshot when anything was recorded since the last
// one (so that the next start replays nothing), then closes the journal.
// The index is the owner's to close. A failed last snapshot is logged;
// Close returns the journal's error.
func (k *Keeper) Close() error {
	if !k.o.ReadOnly && k.j.Mark().Seq > k.lastSnapshot() {
		if _, _, err := k.Snapshot(); err != nil && !errors.Is(err, ErrClosed) {
			k.log.Error("history: no snapshot at close", "err", err)
		}
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	return k.j.Close()
}
