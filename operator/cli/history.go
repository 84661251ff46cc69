package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/stewardrt/steward/internal/durable"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
)

// cmdHistorySnapshot makes a snapshot of the store's state now, through
// the running host when it runs: the next start replays only what
// follows it, and an archive may take the segments before it.
func (c *CLI) cmdHistorySnapshot(args []string) error {
	fs, store := flags("history snapshot")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpHistorySnapshot})
	if err != nil {
		return err
	}
	if rep.Snapshot == "" {
		fmt.Fprintln(c.Stdout, "nothing recorded since the last snapshot: none written")
		return nil
	}
	fmt.Fprintln(c.Stdout, "snapshot", rep.Snapshot)
	return nil
}

// cmdHistoryArchive moves the journal's segments before the newest
// snapshot's mark into a new archive directory, through the running host
// when it runs: it makes the snapshot, exports the receipts and verifies
// the export (written beside the archive, DIR.receipts), writes the
// verified point at the snapshot's mark (DIR.point, signed with the
// operator key), and only then has the journal archive what the snapshot
// leaves behind.
func (c *CLI) cmdHistoryArchive(args []string) error {
	fs, store := flags("history archive")
	to := fs.String("to", "", "the new archive `DIR` (absent or empty) the journal's old segments move to")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	if *to == "" {
		return fmt.Errorf("%w: --to DIR is required", errUsage)
	}
	dir, err := filepath.Abs(*to)
	if err != nil {
		return err
	}
	rep, err := c.admin(*store, admin.Request{Op: admin.OpHistorySnapshot})
	if err != nil {
		return err
	}
	if rep.Mark == nil {
		return views.Refusedf("the store has no snapshot to archive up to: nothing was recorded")
	}
	mark := *rep.Mark
	key, err := operator.ReadKey(*store)
	if err != nil {
		return err
	}
	b, pt, vrep, err := audit.ExportVerifiedPoint(*store, mark, func(d []byte) ([]byte, error) { return wire.SignHybrid(key, d) })
	if err != nil {
		return err
	}
	receipts, point := audit.ReceiptsFileOf(dir), audit.PointFileOf(dir)
	if err := durable.WriteAtomic(receipts, b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "receipts 1..%d exported to %s and verified (%s)\n", vrep.LastSeq, receipts, vrep.Head)
	// The point is written before the archive is made, so that an archive
	// never stands without the point that lets a verify do without it.
	if err := durable.WriteAtomic(point, pt, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "verified point at journal record %d written to %s (receipts verify --from %s needs no archive)\n", mark.Seq, point, point)
	rep, err = c.adminWithin(*store, archiveWait, admin.Request{Op: admin.OpHistoryArchive, Name: dir, Mark: &mark})
	if err != nil {
		return err
	}
	a := rep.Archived
	fmt.Fprintf(c.Stdout, "archived journal records %d..%d (%d segments) in %s, before the snapshot at record %d\n",
		a.First, a.Last, len(a.Segments), a.Dir, mark.Seq)
	return nil
}

// archiveWait bounds how long `history archive` waits for the host to
// copy, verify and remove the segments.
const archiveWait = 30 * time.Minute
