package controller

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// heldReceipt is one host receipt the controller journal holds: in the
// result or resolution record seq, the host's receipt number hostSeq.
type heldReceipt struct {
	seq, hostSeq uint64
	signed       []byte
}

// receiptExport is what `history archive` gathered of the records it is
// to archive: their receipts, each verified, and the request hashes of
// the attempts begun among them that have not ended yet.
type receiptExport struct {
	c       *Controller
	hostKey []byte
	rs      []heldReceipt
	begun   map[string][]byte
	// through is the last record the archive takes as far as is known
	// before it is made: the mark, or for a run the journal only finishes
	// (resumed), the last record of the archive it already made.
	through uint64
}

// file is the receipts file of the receipts in records up to through: the
// format `steward-operator receipts export` writes (msg.ReceiptsFile),
// which `steward-controller receipts compare --file` reads: the pinned
// host key, the receipts in the host's chain order, and no checkpoint
// (the controller holds none).
func (e *receiptExport) file(through uint64) ([]byte, error) {
	var rs []heldReceipt
	for _, h := range e.rs {
		if h.seq <= through {
			rs = append(rs, h)
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].hostSeq < rs[j].hostSeq })
	f := msg.ReceiptsFile{HostKey: e.hostKey, Receipts: [][]byte{}, Checkpoints: [][]byte{}}
	for _, h := range rs {
		f.Receipts = append(f.Receipts, h.signed)
	}
	return msg.MarshalReceiptsFile(f)
}

// count is how many receipts are in records up to through.
func (e *receiptExport) count(through uint64) int {
	n := 0
	for _, h := range e.rs {
		if h.seq <= through {
			n++
		}
	}
	return n
}

// exportReceipts reads the records `history archive` to dir up to mark m
// would archive, from the first one not yet archived (or, when an
// interrupted run already based the journal on dir, from that archive's
// first), and gathers their host receipts, each verified. What the
// journal would refuse without changing anything is refused first, so
// that no receipts file is written for it: a mark already archived or at
// the base, no whole segment before the mark, an archive directory in use.
func (c *Controller) exportReceipts(dir string, m journal.Mark) (*receiptExport, error) {
	base, based := c.j.Base()
	var newest journal.ArchiveRef
	if based {
		newest = base.Archives[len(base.Archives)-1]
	}
	// An interrupted run that based the journal on dir left segments to
	// remove: the journal finishes it, and its receipts are read again
	// from the archive. Once they are removed, dir is done.
	resumed := based && newest.Dir == dir && len(base.Leftover) > 0
	if based && newest.Dir == dir && !resumed {
		return nil, refusedf("history archive: records %d..%d are archived in %s already", newest.First, newest.Last, newest.Name)
	}
	if err := c.checkArchiveDir(dir, resumed); err != nil {
		return nil, err
	}
	if based && !resumed && m.Seq <= base.Seq {
		return nil, refusedf("history archive: nothing to archive: everything up to record %d is archived already (in %s), the snapshot's mark is at record %d",
			base.Seq, newest.Name, m.Seq)
	}
	e := &receiptExport{c: c, hostKey: c.bind.HostKey.MarshalCOSEKey(), begun: map[string][]byte{}, through: m.Seq}
	if resumed {
		e.through = newest.Last
		a, err := journal.OpenArchive(dir)
		if err != nil {
			return nil, fmt.Errorf("history archive: the archive the journal's base names does not open: %w", err)
		}
		var bad *errReceipt
		if err := a.Iterate(0, e.take); errors.As(err, &bad) {
			return nil, err
		} else if err != nil {
			return nil, fmt.Errorf("history archive: reading archive %s: %w", filepath.Base(dir), err)
		}
		return e, nil // the live records stay live: the journal only finishes
	}
	first, next := uint64(0), uint64(0)
	err := c.j.Iterate(0, func(r journal.Record) error {
		if r.Seq > m.Seq {
			next = r.Place.Segment
			return errStop
		}
		if first == 0 {
			first = r.Place.Segment
		}
		return e.take(r)
	})
	var bad *errReceipt
	switch {
	case errors.As(err, &bad):
		return nil, err
	case err != nil && !errors.Is(err, errStop):
		return nil, fmt.Errorf("history archive: reading the journal: %w", err)
	}
	// The archive takes the segments wholly before the mark: the mark's
	// own only when it ends it and the next record begins another.
	if !resumed && first == m.Segment && next != m.Seq+1 {
		return nil, refusedf("history archive: nothing to archive: no whole journal segment precedes the snapshot's mark at record %d", m.Seq)
	}
	return e, nil
}

// take gathers record r's receipt, verified (checkHeld), and its begin's
// request hash.
func (e *receiptExport) take(r journal.Record) error {
	var attempt string
	var signed []byte
	var answer *ledger.Result // set for an end that carries the host's answer
	switch r.Kind {
	case ledger.KindBegin:
		var b ledger.Begin
		if err := ledger.Decode(r, &b); err != nil {
			return err
		}
		e.begun[b.Attempt] = b.RequestSHA256
		return nil
	case ledger.KindResult:
		var x ledger.Result
		if err := ledger.Decode(r, &x); err != nil {
			return err
		}
		attempt, signed = x.Attempt, x.Receipt
		if x.Outcome == msg.StateDefinite {
			answer = &x
		}
	case ledger.KindResolve:
		var x ledger.Resolve
		if err := ledger.Decode(r, &x); err != nil {
			return err
		}
		attempt, signed = x.Attempt, x.Receipt
		if x.State == msg.StateDefinite {
			answer = &ledger.Result{Status: x.Status, Body: x.Body}
		}
	case ledger.KindResolveV2:
		var x ledger.ResolveV2
		if err := ledger.Decode(r, &x); err != nil {
			return err
		}
		attempt, signed = x.Attempt, x.Receipt
		if x.State == msg.StateDefinite {
			answer = &ledger.Result{Status: x.Status, Body: x.Body}
		}
	default:
		return nil
	}
	if signed == nil {
		return nil
	}
	reqSHA, begun := e.begun[attempt]
	delete(e.begun, attempt) // an attempt ends once: memory holds what is under way
	rc, err := e.c.checkHeld(signed, attempt, reqSHA, begun, answer)
	if err != nil {
		return receiptError(r.Seq, attempt, err)
	}
	e.rs = append(e.rs, heldReceipt{seq: r.Seq, hostSeq: rc.Seq, signed: signed})
	return nil
}

// errReceipt is a receipt of the journal that does not verify: the
// archive stops, and nothing is archived.
type errReceipt struct{ msg string }

func (e *errReceipt) Error() string { return e.msg }

func receiptError(seq uint64, attempt string, err error) error {
	return &errReceipt{fmt.Sprintf("history archive: the host's receipt in journal record %d (attempt %s) does not verify: %s; nothing was archived",
		seq, attempt, strings.ReplaceAll(err.Error(), "\n", " "))}
}

// checkHeld checks a receipt the journal holds as the controller checked
// it when it took it: signed by the pinned host key, for this attempt and
// controller, the begin's request (when the begin is among the records
// read), its own terms, and for an answer the answer's status and body.
func (c *Controller) checkHeld(signed []byte, attempt string, reqSHA []byte, begun bool, answer *ledger.Result) (msg.Receipt, error) {
	var rc msg.Receipt
	var err error
	if begun {
		rc, err = c.openReceipt(signed, attempt, reqSHA)
	} else if rc, err = msg.VerifyReceipt(signed, c.bind.HostRing); err == nil && rc.Attempt != attempt {
		// The begin is in an earlier archive: the request hash was
		// checked against it when the receipt was taken.
		err = fmt.Errorf("receipt is for attempt %s", rc.Attempt)
	}
	switch {
	case err != nil:
		return rc, err
	case rc.Controller != c.cfg.Name:
		return rc, fmt.Errorf("receipt is for controller %q", rc.Controller)
	}
	if answer != nil {
		if err := receiptAnswers(rc, answer.Body, answer.Status); err != nil {
			return rc, err
		}
	}
	return rc, rc.CheckTerms()
}

// checkArchiveDir refuses an archive directory the journal would refuse
// without changing anything, before a receipts file is written for it:
// one inside the journal, or one that holds anything but nothing (absent,
// or an empty directory) or the archive an interrupted run of the same
// archive made (resumed: the journal's base names it; or a whole archive
// of the first live records, not yet based on).
func (c *Controller) checkArchiveDir(dir string, resumed bool) error {
	jdir, err := filepath.Abs(c.j.Dir())
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(jdir, dir); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return refusedf("history archive: the archive directory %s is inside the journal %s", dir, jdir)
	}
	if resumed {
		return nil
	}
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return refusedf("history archive: the archive directory %s: %v", dir, err)
	}
	_, err = d.Readdirnames(1)
	d.Close()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if a, aerr := journal.OpenArchive(dir); aerr == nil {
		if b, based := c.j.Base(); a.Archived().First == 1 && !based || based && a.Archived().First == b.Seq+1 {
			return nil // an interrupted run's, which the journal takes up
		}
	}
	return refusedf("history archive: the archive directory %s is in use: it must be absent or empty", dir)
}
