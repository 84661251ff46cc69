package audit

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// A host journal `history archive` archived starts at its base: records 1
// to the base's seq are in archives (journal.OpenArchive), the rest in
// the live directory. The audit reads them all, archives first, so that it
// checks what it always did (the receipt chain from receipt 1, the purses
// from their funding), and says where each part came from.

// ArchiveRead is one archive an audit read, whole and verified: the
// journal records First to Last, from the archive directory Dir.
type ArchiveRead struct {
	Name  string `json:"name"`
	Dir   string `json:"dir"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

// readJournal calls fn with every record of the host journal j after
// the point's mark after (nil: from record 1), named point: those its base
// archived first, from the archives (dirs, oldest first; nil: where the
// base says each was made), each verified whole (OpenArchive) and the
// one the base names (its manifest's digest) and chained on the one
// before, then the live ones. An archive that holds only records at or
// before the point is not opened. The first record after a point must
// chain on its mark. It returns the archives it read.
func readJournal(j *journal.Journal, dirs []string, after *journal.Mark, point string, fn func(journal.Record) error) ([]ArchiveRead, error) {
	var from uint64
	if after != nil {
		from = after.Seq
		fn = chainedOn(after, point, fn)
	}
	b, based := j.Base()
	if !based && len(dirs) > 0 {
		return nil, refusedf("archives were given, but the journal %s has no base: nothing of it is archived", j.Dir())
	}
	if !based || from >= b.Seq {
		return nil, j.Iterate(from+1, fn)
	}
	if dirs != nil && len(dirs) != len(b.Archives) {
		return nil, refusedf("the journal's base names %d archives (%s), %d were given (--archive DIR for each, oldest first)",
			len(b.Archives), archiveNames(b.Archives), len(dirs))
	}
	var out []ArchiveRead
	var prev [32]byte
	skipped := false
	for i, ref := range b.Archives {
		if ref.Last <= from {
			skipped = true // wholly before the point: not needed
			continue
		}
		dir := ref.Dir
		if dirs != nil {
			dir = dirs[i]
		}
		a, err := journal.OpenArchive(dir)
		if err != nil {
			return nil, fmt.Errorf("journal records %d to %d are archived in %s, which does not open (give it with --archive DIR): %w", ref.First, ref.Last, ref.Name, err)
		}
		ad := a.Archived()
		switch {
		case ad.Manifest != ref.Manifest:
			return nil, faultf("archive %s is not the %s the journal's base names: its manifest's digest is %x, the base's %x", dir, ref.Name, ad.Manifest, ref.Manifest)
		case ad.Prev != prev && !skipped:
			return nil, faultf("archive %s does not chain on the archive before it", dir)
		}
		start := uint64(0)
		if from >= ad.First {
			start = from + 1
		}
		if err := a.Iterate(start, fn); err != nil {
			return nil, err
		}
		prev, skipped = ad.Head, false
		out = append(out, ArchiveRead{Name: ad.Name, Dir: ad.Dir, First: max(ad.First, from+1), Last: ad.Last})
	}
	if prev != b.Head {
		return nil, faultf("the last archive does not end at the head the journal's base starts from")
	}
	return out, j.Iterate(0, fn)
}

// chainedOn is fn checking first that the first record it is given is the
// one after mark m, chained on its head.
func chainedOn(m *journal.Mark, point string, fn func(journal.Record) error) func(journal.Record) error {
	first := true
	return func(r journal.Record) error {
		if first {
			first = false
			if r.Seq != m.Seq+1 || !bytes.Equal(r.Prev, m.Head) {
				return faultf("point %s: journal record %d does not chain on its mark at journal record %d", point, r.Seq, m.Seq)
			}
		}
		return fn(r)
	}
}

func archiveNames(refs []journal.ArchiveRef) string {
	var names []string
	for _, r := range refs {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ")
}

// PointRead is the verified point an audit went on from: it carried
// journal records 1 to Through, from the point file File.
type PointRead struct {
	File    string `json:"file"`
	Through uint64 `json:"through"`
}

// Checked says what an audit read, in one line: the verified point, the
// archives and the live journal, by journal record.
func (rep ReceiptReport) Checked() string {
	var parts []string
	next := uint64(1)
	if p := rep.Point; p != nil {
		parts = append(parts, fmt.Sprintf("1..%d from the verified point %s", p.Through, p.File))
		next = p.Through + 1
	}
	for _, a := range rep.Archives {
		parts = append(parts, fmt.Sprintf("%d..%d from archive %s (%s)", a.First, a.Last, a.Name, a.Dir))
		next = a.Last + 1
	}
	switch {
	case len(parts) == 0:
		return fmt.Sprintf("journal records 1..%d read from the live journal", rep.Records)
	case next <= rep.Records:
		parts = append(parts, fmt.Sprintf("%d..%d from the live journal", next, rep.Records))
	default:
		parts = append(parts, "none after them in the live journal")
	}
	return "journal records " + strings.Join(parts, ", ")
}

// ExportVerified is what `history archive` exports before it archives:
// the store's receipts file (ExportStore, reading the archives where the
// journal's base says they are), refused unless its read of the journal
// reached record through (a snapshot's mark: every receipt the archive
// will take is then in it), and verified as `receipts verify --file`
// verifies it, against the store's pinned host key. It returns the file
// and that verification's report.
func ExportVerified(dir string, through uint64) ([]byte, ReceiptReport, error) {
	b, _, rep, err := ExportVerifiedPoint(dir, journal.Mark{Seq: through}, nil)
	return b, rep, err
}

// ExportVerifiedPoint is ExportVerified up to mark (the snapshot's the
// archive is made up to) that also, with sign, returns the verified point
// at mark (point.go), signed: what the audit carried after record
// mark.Seq, whose head must be mark's. A point is made only when the
// verify, to the last record read, has no fault and no finding but
// reservations still open: those the point carries, as open, for the
// verify that goes on from it to judge.
func ExportVerifiedPoint(dir string, mark journal.Mark, sign SignFunc) (receipts, point []byte, _ ReceiptReport, _ error) {
	rn := run{dir: dir, keep: true}
	if sign != nil {
		rn.at = &mark
	}
	res, err := rn.audit()
	rep := res.rep
	if err != nil {
		return nil, nil, rep, err
	}
	if rep.Records < mark.Seq {
		return nil, nil, rep, fmt.Errorf("the receipts export read the journal to record %d, short of the snapshot's mark at record %d", rep.Records, mark.Seq)
	}
	a := res.a
	b, err := exportFile(a)
	if err != nil {
		return nil, nil, rep, err
	}
	vrep, err := VerifyFileKeys(b, FileKeys{Host: a.pub})
	if err != nil {
		return nil, nil, vrep, fmt.Errorf("the receipts export does not verify: %w", err)
	}
	if vrep.Receipts != rep.Receipts || vrep.Head != rep.Head {
		return nil, nil, vrep, faultf("the receipts export holds %d receipts to head %s, the journal %d to %s", vrep.Receipts, vrep.Head, rep.Receipts, rep.Head)
	}
	if sign == nil {
		return b, nil, vrep, nil
	}
	if err := findingsError(rep.Findings); err != nil {
		return nil, nil, vrep, fmt.Errorf("no point made: %w", err)
	}
	if res.taken == nil || !res.atHead {
		return nil, nil, vrep, faultf("the snapshot's mark at journal record %d is not a point of the journal read", mark.Seq)
	}
	p, err := encodePoint(a.pub, mark, *res.taken, sign)
	if err != nil {
		return nil, nil, vrep, err
	}
	return b, p, vrep, nil
}

// exportFile is the receipts file of what an audit gathered (kept: run's
// keep).
func exportFile(a *journalAudit) ([]byte, error) {
	if err := findingsError(a.findings); err != nil {
		return nil, err
	}
	rs := chainOrder(a.kept)
	f := msg.ReceiptsFile{HostKey: a.pub.MarshalCOSEKey()}
	for _, c := range rs {
		f.Receipts = append(f.Receipts, c.signed)
	}
	for _, cp := range a.keptCPs {
		f.Checkpoints = append(f.Checkpoints, cp.signed)
	}
	return msg.MarshalReceiptsFile(f)
}

// ReceiptsFileOf is the receipts file `history archive` writes beside the
// archive directory dir: dir + ".receipts".
func ReceiptsFileOf(dir string) string { return filepath.Clean(dir) + ".receipts" }
