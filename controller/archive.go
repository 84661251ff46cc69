package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/history"
	"github.com/stewardrt/steward/wire/msg"
)

// The controller's retention (DESIGN.md section 13, "The controller's
// archive"): `history snapshot` makes a snapshot now, and `history
// archive` makes one, exports the host's receipts of the records it will
// archive, each verified under the pinned host key, into DIR.receipts,
// and only then moves the journal's segments before the snapshot's mark
// into the archive DIR (journal.Archive). Both run in the process that
// holds the journal: the daemon, through its foreground socket, or the
// command itself on a stopped controller.

// ErrRefused is wrapped by a history command's refusal: what it was asked
// cannot be done, and nothing was changed (exit 2).
var ErrRefused = errors.New("refused")

// refusedf is a refusal: one line, wrapping ErrRefused.
func refusedf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// SnapshotReport is what `history snapshot` made.
type SnapshotReport struct {
	// Snapshot is the file written, "" when nothing was recorded since
	// the last snapshot (none was due, and none written).
	Snapshot string `json:"snapshot"`
	// Seq is the mark of the newest snapshot (the one written, or the
	// last one): 0 when there is none.
	Seq uint64 `json:"seq"`
}

// ArchiveReport is what `history archive` exported and archived.
type ArchiveReport struct {
	Snapshot string `json:"snapshot"` // the snapshot it made, "" when none was due
	MarkSeq  uint64 `json:"markSeq"`  // the newest snapshot's mark, archived up to
	// Receipts is the receipts file (DIR.receipts) and ReceiptCount how
	// many receipts it holds: those of the archived records, each
	// verified under the pinned host key.
	Receipts     string `json:"receipts"`
	ReceiptCount int    `json:"receiptCount"`
	// First and Last are the records archived, in Segments segment files
	// in Dir (the archive's name is Dir's base name).
	First    uint64 `json:"first"`
	Last     uint64 `json:"last"`
	Segments int    `json:"segments"`
	Dir      string `json:"dir"`
}

// ReceiptsFileOf is the receipts file `history archive` writes beside the
// archive directory dir: dir + ".receipts", as the host's does.
func ReceiptsFileOf(dir string) string { return filepath.Clean(dir) + ".receipts" }

// snapshotNow makes a snapshot of the ledger now (none when nothing was
// recorded since the last one), and drops from memory the requestIds the
// synced index now holds, as after the keeper's own snapshots.
func (c *Controller) snapshotNow() (journal.Mark, SnapshotReport, error) {
	if c.hist == nil {
		return journal.Mark{}, SnapshotReport{}, errors.New("history snapshot: the controller was opened without its history")
	}
	m, name, err := c.hist.keeper.Snapshot()
	if err != nil {
		return m, SnapshotReport{}, fmt.Errorf("history snapshot: %w", err)
	}
	if name != "" {
		n := c.led.Forget(m.Seq)
		c.log.Info("controller history: snapshot made on request", "snapshot", name, "seq", m.Seq, "forgotten", n)
	}
	return m, SnapshotReport{Snapshot: name, Seq: m.Seq}, nil
}

// HistorySnapshot makes a snapshot of the ledger now, also when none is
// due: the next start replays only what follows it, and an archive may
// take the segments before it.
func (c *Controller) HistorySnapshot() (SnapshotReport, error) {
	_, rep, err := c.snapshotNow()
	return rep, err
}

// HistoryArchive makes a snapshot, exports the host's receipts of what it
// will archive into ReceiptsFileOf(dir) (0600, written atomically), each
// checked under the pinned host key, and only then archives the journal's
// segments before the snapshot's mark into dir (absolute, absent or
// empty). A receipt that does not verify stops it, naming its record,
// with nothing archived. Refusals (nothing recorded, nothing to archive,
// the directory in use, a mark the journal refuses, already archived)
// wrap ErrRefused and change nothing: a receipts file this call wrote is
// removed again.
func (c *Controller) HistoryArchive(dir string) (ArchiveReport, error) {
	if !filepath.IsAbs(dir) {
		return ArchiveReport{}, refusedf("history archive: the archive directory %q is not absolute", dir)
	}
	dir = filepath.Clean(dir)
	c.archiving.Lock()
	defer c.archiving.Unlock()
	m, snap, err := c.snapshotNow()
	if err != nil {
		return ArchiveReport{}, err
	}
	if m.Seq == 0 {
		return ArchiveReport{}, refusedf("history archive: the controller has no snapshot to archive up to: nothing was recorded")
	}
	rep := ArchiveReport{Snapshot: snap.Snapshot, MarkSeq: m.Seq, Receipts: ReceiptsFileOf(dir), Dir: dir}
	exp, err := c.exportReceipts(dir, m)
	if err != nil {
		return rep, err
	}
	_, statErr := os.Lstat(rep.Receipts)
	created := errors.Is(statErr, fs.ErrNotExist)
	b, err := exp.file(exp.through)
	if err != nil {
		return rep, err
	}
	if err := durable.WriteAtomic(rep.Receipts, b, 0o600); err != nil {
		return rep, fmt.Errorf("history archive: writing the receipts: %w", err)
	}
	a, err := c.archiveUpTo(dir, m)
	if err != nil {
		if errors.Is(err, ErrRefused) && created {
			// The journal refused: nothing of this call stays.
			if rerr := os.Remove(rep.Receipts); rerr == nil {
				_ = durable.SyncDir(filepath.Dir(rep.Receipts))
			}
		}
		return rep, err
	}
	if a.Last < exp.through {
		// The mark's own segment stays live: the file holds exactly the
		// receipts of the archived records.
		if b, err = exp.file(a.Last); err == nil {
			err = durable.WriteAtomic(rep.Receipts, b, 0o600)
		}
		if err != nil {
			return rep, fmt.Errorf("history archive: records %d..%d are archived in %s, but cutting %s to them failed (it holds the receipts to record %d): %w",
				a.First, a.Last, dir, rep.Receipts, exp.through, err)
		}
	}
	rep.ReceiptCount = exp.count(a.Last)
	rep.First, rep.Last, rep.Segments = a.First, a.Last, len(a.Segments)
	c.log.Info("controller history: archived", "archive", dir, "first", a.First, "last", a.Last, "segments", len(a.Segments),
		"receipts", rep.ReceiptCount, "receiptsFile", rep.Receipts)
	return rep, nil
}

// archiveUpTo moves the journal's segments wholly before mark m into the
// archive dir: m must be at or before the newest snapshot's mark, so that
// the next start loads a snapshot the archive leaves whole. What the
// journal refuses is a refusal.
func (c *Controller) archiveUpTo(dir string, m journal.Mark) (journal.Archived, error) {
	a, err := c.hist.keeper.Archive(dir, m)
	if errors.Is(err, history.ErrPastSnapshot) || journal.RefusedArchive(err) {
		return a, refusedf("history archive: %v", err)
	}
	if err != nil {
		return a, fmt.Errorf("history archive: %w", err)
	}
	return a, nil
}

// archivedAnswer is the refusal of a call again with requestID when err,
// reading the answer of its attempt, says the record is archived: one line
// naming the archive (its name, never its path), nothing sent. It is nil
// for any other err.
func archivedAnswer(err error, requestID, attempt string) *ToolResult {
	var ae *journal.ArchivedError
	if !errors.As(err, &ae) {
		return nil
	}
	return refused(msg.CodeArchived, fmt.Sprintf("requestId %q is archived in %s: its recorded answer is not served again and nothing was sent; a new call needs a new requestId", requestID, ae.Archive), attempt)
}
