package audit

import (
	"bytes"
	"errors"
	"path/filepath"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// VerifyStore checks the whole receipt history of the operator store in
// dir, opened read-only (it takes no lock, so the host may be running):
// every receipt's signature and chain link, the checkpoints, that each
// receipt matches its reservation and outcome records (attempt, request,
// response, status, charge, the payer's consent under the controller's
// pinned dispatch key), and the purse arithmetic (hostlog's doc, the
// ledger). It returns the first fault.
//
// A reservation's consent that does not hold, and a reservation the
// journal gives no outcome (its charge held without a receipt), are
// findings: the report lists every one and the error names the first.
//
// A journal `history archive` archived is read from its archives first,
// where its base says they are (VerifyArchived names them), and the
// report says what was read where (Archives, Checked).
func VerifyStore(dir string) (ReceiptReport, error) {
	return VerifyServing(dir, nil)
}

// AttemptState is what the running host says an attempt's state is now
// (its admin socket's attempt inspect).
type AttemptState func(attempt string) (msg.State, error)

// VerifyServing is VerifyStore for a store whose host may be serving:
// when the journal was read while its owner ran (journal.Live) and now
// is set, each reservation with no outcome in what was read is asked of
// the host. Still delivery-requested, or ended since (its outcome was
// written after the read), it is listed in Report.Open; uncertain, not
// seen, or when the host cannot be asked, it is a finding as in
// VerifyStore. A crash's reservation is uncertain on the host that
// restarted; only a call in flight is delivery-requested.
func VerifyServing(dir string, now AttemptState) (ReceiptReport, error) {
	return VerifyArchived(dir, nil, now)
}

// VerifyArchived is VerifyServing reading the journal's archives from
// archives (one directory for each archive its base names, oldest first;
// nil: where the base says each was made).
func VerifyArchived(dir string, archives []string, now AttemptState) (ReceiptReport, error) {
	rep, _, err := Verify(dir, VerifyOptions{Archives: archives, Now: now})
	return rep, err
}

// VerifyOptions says where Verify starts and what it writes.
type VerifyOptions struct {
	Archives []string     // VerifyArchived's archives
	Now      AttemptState // VerifyServing's now
	// Point, when not nil, is a verified point file's bytes, named
	// PointName in the report and the errors: the verify goes on from its
	// mark, reading no record before it (point.go).
	Point     []byte
	PointName string
	// SavePoint, when not nil, signs the point at the last record read,
	// which Verify returns after a verify with no fault and no finding.
	SavePoint SignFunc
}

// Verify is VerifyArchived from a verified point (o.Point) and making the
// next one (o.SavePoint): it returns the report and, with SavePoint and
// no fault or finding, the point file at the last record read (nil
// otherwise).
func Verify(dir string, o VerifyOptions) (ReceiptReport, []byte, error) {
	rn := run{dir: dir, archives: o.Archives}
	if o.Point != nil {
		pub, err := hostlog.ReadPub(dir)
		if err != nil {
			return ReceiptReport{}, nil, err
		}
		if rn.pt, err = openPoint(o.PointName, o.Point, pub); err != nil {
			return ReceiptReport{}, nil, err
		}
	}
	res, err := rn.audit()
	if err != nil {
		return res.rep, nil, err
	}
	a, rep := res.a, res.rep
	for _, h := range a.held() {
		line := heldLine(h)
		if a.live && o.Now != nil {
			st, err := o.Now(h.rec.Attempt)
			switch {
			case err != nil:
				line += "; the running host could not be asked whether it is in flight: " + err.Error()
			case st == msg.StateDeliveryRequested:
				rep.Open = append(rep.Open, line+"; in flight on the running host")
				continue
			case st != msg.StateUncertain && st != msg.StateNotSeen && st != msg.StateAwaitingApproval:
				rep.Open = append(rep.Open, line+"; "+string(st)+" on the running host, recorded after the read")
				continue
			}
		}
		rep.Findings = append(rep.Findings, line)
	}
	if err := findingsError(rep.Findings); err != nil {
		return rep, nil, err
	}
	if o.SavePoint == nil {
		return rep, nil, nil
	}
	b, err := encodePoint(a.pub, res.last, a.state(), o.SavePoint)
	return rep, b, err
}

// findingsError is the error of a report with findings: a receipt fault
// naming how many and the first (nil with none).
func findingsError(fs []string) error {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return faultf("1 finding: %s", fs[0])
	}
	return faultf("%d findings, the first: %s", len(fs), fs[0])
}

// run is one pass of the audit over a store's journal: from record 1, or
// from a verified point pt; keep keeps every receipt (an export); at,
// when not nil, is a mark whose state the pass takes (history archive's
// point).
type run struct {
	dir      string
	archives []string
	pt       *point
	keep     bool
	at       *journal.Mark
}

// runResult is what a pass gathered: the audit, its report, the mark of
// the last record read, and the state at the run's mark (taken; nil when
// the pass did not reach it).
type runResult struct {
	a     *journalAudit
	rep   ReceiptReport
	last  journal.Mark
	taken *pointState
	// atHead: the record at the run's mark has the mark's head.
	atHead bool
}

// audit reads the journal (its archives first) and checks it.
func (rn run) audit() (runResult, error) {
	j, pub, err := rn.open()
	if err != nil {
		return runResult{}, err
	}
	defer j.Close()
	a := newJournalAudit(pub)
	var after *journal.Mark
	if rn.pt != nil {
		if a, err = restore(pub, rn.pt.state); err != nil {
			return runResult{}, faultf("point %s: %v", rn.pt.name, err)
		}
		after = &rn.pt.mark
	}
	a.keep = rn.keep
	res := runResult{a: a}
	fn := a.record
	if rn.at != nil {
		fn = func(r journal.Record) error {
			if err := a.record(r); err != nil {
				return err
			}
			switch r.Seq {
			case rn.at.Seq:
				st := a.state()
				res.taken = &st
			case rn.at.Seq + 1:
				res.atHead = bytes.Equal(r.Prev, rn.at.Head)
			}
			return nil
		}
	}
	read, err := readJournal(j, rn.archives, after, rn.pointName(), fn)
	if err != nil {
		return runResult{}, err
	}
	res.last = j.Mark()
	if rn.at != nil && res.last.Seq == rn.at.Seq {
		res.atHead = bytes.Equal(res.last.Head, rn.at.Head)
	}
	res.rep, err = a.report()
	res.rep.Archives, res.rep.Records = read, j.LastSeq()
	if rn.pt != nil {
		res.rep.Point = &PointRead{File: rn.pt.name, Through: rn.pt.mark.Seq}
	}
	a.live = j.Live()
	return res, err
}

func (rn run) pointName() string {
	if rn.pt == nil {
		return ""
	}
	return rn.pt.name
}

// open opens the store's journal read-only: from the point's mark when
// there is a point at or after the journal's base (nothing before it is
// read), else whole (a point before the base is gone on from in the
// archives).
func (rn run) open() (*journal.Journal, *wire.HybridPublicKey, error) {
	if rn.pt == nil {
		return hostlog.OpenReadOnly(rn.dir)
	}
	pub, err := hostlog.ReadPub(rn.dir)
	if err != nil {
		return nil, nil, err
	}
	o := hostlog.Options(pub)
	o.ReadOnly = true
	o.From = &rn.pt.mark
	j, err := journal.Open(filepath.Join(rn.dir, hostlog.JournalDir), o)
	if err == nil {
		return j, pub, nil
	}
	var ae *journal.ArchivedError
	if !errors.Is(err, journal.ErrMarkMismatch) && !errors.As(err, &ae) {
		return nil, nil, err
	}
	whole, _, werr := hostlog.OpenReadOnly(rn.dir)
	if werr != nil {
		return nil, nil, werr
	}
	if b, based := whole.Base(); based && rn.pt.mark.Seq < b.Seq {
		return whole, pub, nil
	}
	whole.Close()
	return nil, nil, faultf("point %s: its mark at journal record %d is not a point of this journal: %v", rn.pt.name, rn.pt.mark.Seq, err)
}

// report is the audit's report of what it read, or its first fault: the
// chain's, then the purses'. It changes nothing carried.
func (a *journalAudit) report() (ReceiptReport, error) {
	rep, err := a.chain.finish()
	if err != nil {
		return rep, err
	}
	if rep.Purses, err = a.purses(); err != nil {
		return rep, err
	}
	rep.Consents = a.consentReports()
	rep.Agents = append([]AgentReport(nil), a.agents...)
	rep.Findings = append(append([]string(nil), a.findings...), a.agentFinds...)
	return rep, nil
}

// ExportStore returns what `receipts export` writes, a msg.ReceiptsFile
// (CBOR) of the receipts and checkpoints of the operator store in dir,
// after verifying them: the receipts that verify gathered, in chain order,
// and the checkpoints in journal order. A consent finding refuses the
// export; a reservation still held does not (it has no receipt to
// export). The file is not signed as a whole: what it proves is its
// receipts' and checkpoints' own signatures, and a prefix of the chain is
// as well signed as the chain.
func ExportStore(dir string) ([]byte, error) {
	res, err := run{dir: dir, keep: true}.audit()
	if err != nil {
		return nil, err
	}
	return exportFile(res.a)
}
