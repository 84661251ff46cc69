package audit

import (
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

// readJournal calls fn with every record of the host journal j: those its
// base archived first, from the archives (dirs, oldest first; nil: where
// the base says each was made), each verified whole (OpenArchive) and the
// one the base names (its manifest's digest) and chained on the one
// before, then the live ones. It returns the archives it read.
func readJournal(j *journal.Journal, dirs []string, fn func(journal.Record) error) ([]ArchiveRead, error) {
	b, based := j.Base()
	if !based {
		if len(dirs) > 0 {
			return nil, refusedf("archives were given, but the journal %s has no base: nothing of it is archived", j.Dir())
		}
		return nil, j.Iterate(1, fn)
	}
	if dirs != nil && len(dirs) != len(b.Archives) {
		return nil, refusedf("the journal's base names %d archives (%s), %d were given (--archive DIR for each, oldest first)",
			len(b.Archives), archiveNames(b.Archives), len(dirs))
	}
	var out []ArchiveRead
	var prev [32]byte
	for i, ref := range b.Archives {
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
		case ad.Prev != prev:
			return nil, faultf("archive %s does not chain on the archive before it", dir)
		}
		if err := a.Iterate(0, fn); err != nil {
			return nil, err
		}
		prev = ad.Head
		out = append(out, ArchiveRead{Name: ad.Name, Dir: ad.Dir, First: ad.First, Last: ad.Last})
	}
	if prev != b.Head {
		return nil, faultf("the last archive does not end at the head the journal's base starts from")
	}
	return out, j.Iterate(0, fn)
}

func archiveNames(refs []journal.ArchiveRef) string {
	var names []string
	for _, r := range refs {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ")
}

// Checked says what an audit read, in one line: the archives and the
// live journal, by journal record.
func (rep ReceiptReport) Checked() string {
	if len(rep.Archives) == 0 {
		return fmt.Sprintf("journal records 1..%d read from the live journal", rep.Records)
	}
	var parts []string
	for _, a := range rep.Archives {
		parts = append(parts, fmt.Sprintf("%d..%d from archive %s (%s)", a.First, a.Last, a.Name, a.Dir))
	}
	last := rep.Archives[len(rep.Archives)-1].Last
	return fmt.Sprintf("journal records %s, %d..%d from the live journal", strings.Join(parts, ", "), last+1, rep.Records)
}

// ExportVerified is what `history archive` exports before it archives:
// the store's receipts file (ExportStore, reading the archives where the
// journal's base says they are), refused unless its read of the journal
// reached record through (a snapshot's mark: every receipt the archive
// will take is then in it), and verified as `receipts verify --file`
// verifies it, against the store's pinned host key. It returns the file
// and that verification's report.
func ExportVerified(dir string, through uint64) ([]byte, ReceiptReport, error) {
	a, rep, err := auditStoreWith(dir, 1, nil)
	if err != nil {
		return nil, rep, err
	}
	if rep.Records < through {
		return nil, rep, fmt.Errorf("the receipts export read the journal to record %d, short of the snapshot's mark at record %d", rep.Records, through)
	}
	b, err := exportFile(a)
	if err != nil {
		return nil, rep, err
	}
	vrep, err := VerifyFileKeys(b, FileKeys{Host: a.pub})
	if err != nil {
		return nil, vrep, fmt.Errorf("the receipts export does not verify: %w", err)
	}
	if vrep.Receipts != rep.Receipts || vrep.Head != rep.Head {
		return nil, vrep, faultf("the receipts export holds %d receipts to head %s, the journal %d to %s", vrep.Receipts, vrep.Head, rep.Receipts, rep.Head)
	}
	return b, vrep, nil
}

// exportFile is the receipts file of what an audit gathered.
func exportFile(a *journalAudit) ([]byte, error) {
	if err := findingsError(a.findings); err != nil {
		return nil, err
	}
	rs := chainOrder(a.receipts)
	f := msg.ReceiptsFile{HostKey: a.pub.MarshalCOSEKey()}
	for _, c := range rs {
		f.Receipts = append(f.Receipts, c.signed)
	}
	for _, cp := range a.checkpoints {
		f.Checkpoints = append(f.Checkpoints, cp.signed)
	}
	return msg.MarshalReceiptsFile(f)
}

// ReceiptsFileOf is the receipts file `history archive` writes beside the
// archive directory dir: dir + ".receipts".
func ReceiptsFileOf(dir string) string { return filepath.Clean(dir) + ".receipts" }
