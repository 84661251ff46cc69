package operator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// ErrReceiptFault reports a receipt chain that does not verify. The error
// names the first fault found.
var ErrReceiptFault = errors.New("receipt fault")

func faultf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrReceiptFault, fmt.Sprintf(format, args...))
}

// ReceiptReport summarizes a verified receipt chain.
type ReceiptReport struct {
	Receipts       int           `json:"receipts"`
	Checkpoints    int           `json:"checkpoints"`
	CoveredThrough uint64        `json:"coveredThrough"` // receipts 1..N are under a hybrid checkpoint
	Uncovered      int           `json:"uncovered"`      // receipts after the last checkpoint: not a fault
	Head           string        `json:"head"`           // hex ReceiptHash of the last receipt
	Purses         []PurseReport `json:"purses,omitempty"`
}

// PurseReport is one controller's purse as the verifier recomputed it.
type PurseReport struct {
	Controller string `json:"controller"`
	Funded     uint64 `json:"funded"`
	Charged    uint64 `json:"charged"`
	Balance    int64  `json:"balance"`
	Receipts   int    `json:"receipts"`
}

type chainReceipt struct {
	signed []byte
	r      msg.Receipt
	where  string // "journal record N" or "file entry N"
	order  int    // position of its record (journal seq or file index)
}

type chainCheckpoint struct {
	signed []byte
	c      msg.Checkpoint
	where  string
	order  int
}

// verifyChain checks receipt signatures and links (in Seq order, from 1 with
// no gap) and every checkpoint (hybrid signature, the head it names, and
// that every receipt it covers came before it). Receipts with Seq < from
// are linked but not signature-checked.
func verifyChain(rs []chainReceipt, cps []chainCheckpoint, host *wire.HybridPublicKey, from uint64) (ReceiptReport, error) {
	ring := wire.NewKeyring(host.Ed25519())
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].r.Seq < rs[j].r.Seq })
	prev := make([]byte, 32)
	maxOrder := make([]int, len(rs)) // running max of record position by seq
	for i := range rs {
		c := &rs[i]
		if c.r.Seq != uint64(i)+1 {
			if i > 0 && c.r.Seq == rs[i-1].r.Seq {
				return ReceiptReport{}, faultf("receipt %d (%s) appears twice", c.r.Seq, c.where)
			}
			return ReceiptReport{}, faultf("receipt %d is missing (the next is receipt %d, %s)", i+1, c.r.Seq, c.where)
		}
		if c.r.Seq >= from {
			if _, err := msg.VerifyReceipt(c.signed, ring); err != nil {
				return ReceiptReport{}, faultf("receipt %d (%s): %v", c.r.Seq, c.where, err)
			}
		}
		if !bytes.Equal(c.r.Prev, prev) {
			return ReceiptReport{}, faultf("receipt %d (%s): its link does not name receipt %d: the chain is broken", c.r.Seq, c.where, c.r.Seq-1)
		}
		prev = msg.ReceiptHash(c.signed)
		maxOrder[i] = c.order
		if i > 0 && maxOrder[i-1] > maxOrder[i] {
			maxOrder[i] = maxOrder[i-1]
		}
	}
	rep := ReceiptReport{Receipts: len(rs), Checkpoints: len(cps), Head: hex.EncodeToString(prev)}
	for _, cp := range cps {
		c, err := msg.VerifyCheckpoint(cp.signed, host)
		if err != nil {
			return rep, faultf("checkpoint (%s): %v", cp.where, err)
		}
		if c.Seq == 0 || c.Seq > uint64(len(rs)) {
			return rep, faultf("checkpoint (%s) covers receipt %d, but there are %d receipts", cp.where, c.Seq, len(rs))
		}
		if !bytes.Equal(c.Head, msg.ReceiptHash(rs[c.Seq-1].signed)) {
			return rep, faultf("checkpoint (%s): its head is not receipt %d", cp.where, c.Seq)
		}
		if maxOrder[c.Seq-1] > cp.order {
			return rep, faultf("checkpoint (%s) covers receipt %d, which was recorded after it", cp.where, c.Seq)
		}
		if c.Seq > rep.CoveredThrough {
			rep.CoveredThrough = c.Seq
		}
	}
	rep.Uncovered = len(rs) - int(rep.CoveredThrough)
	return rep, nil
}

// VerifyReceipts checks the store's whole receipt history: every receipt's
// signature and chain link, the checkpoints, that each receipt matches its
// reservation and outcome records (attempt, request, response, status,
// charge, the payer's consent under the controller's pinned dispatch key),
// and the purse arithmetic (see doc.go, the ledger). from skips the
// signature checks of receipts before it. It returns the first fault.
func (s *Store) VerifyReceipts(from uint64) (ReceiptReport, error) {
	type reserve struct {
		rec      recReserve
		released bool
	}
	type event struct {
		ledger uint64
		delta  int64
	}
	type balanceCheck struct {
		ledger  uint64
		balance uint64
		seq     uint64
		where   string
	}
	ctrls := map[string]*wire.Keyring{}
	var ctrlOrder []string
	reserves := map[string]*reserve{}
	events := map[string][]event{}
	checks := map[string][]balanceCheck{}
	ledgers := map[uint64]uint64{} // ledger number -> journal seq
	var rs []chainReceipt
	var cps []chainCheckpoint
	ring := s.hostRing
	seeLedger := func(n, seq uint64) error {
		if n == 0 {
			return faultf("journal record %d carries no ledger number", seq)
		}
		if other, dup := ledgers[n]; dup {
			return faultf("journal records %d and %d carry the same ledger number %d", other, seq, n)
		}
		ledgers[n] = seq
		return nil
	}
	err := s.j.Iterate(1, func(r journal.Record) error {
		where := fmt.Sprintf("journal record %d", r.Seq)
		switch r.Kind {
		case kindControllerAdd:
			var b recControllerAdd
			if err := decode(r, &b); err != nil {
				return faultf("%s: %v", where, err)
			}
			var ck msg.ControllerKeys
			if err := wire.Unmarshal(b.Keys, &ck); err != nil {
				return faultf("%s: %v", where, err)
			}
			k, err := wire.ParsePublicKey(ck.Dispatch)
			if err != nil {
				return faultf("%s: %v", where, err)
			}
			ctrls[b.Name] = wire.NewKeyring(k)
			ctrlOrder = append(ctrlOrder, b.Name)
		case kindPurseFund:
			var b recPurseFund
			if err := decode(r, &b); err != nil {
				return faultf("%s: %v", where, err)
			}
			if err := seeLedger(b.Ledger, r.Seq); err != nil {
				return err
			}
			events[b.Controller] = append(events[b.Controller], event{b.Ledger, int64(b.Amount)})
		case kindReserve:
			var b recReserve
			if err := decode(r, &b); err != nil {
				return faultf("%s: %v", where, err)
			}
			if err := seeLedger(b.Ledger, r.Seq); err != nil {
				return err
			}
			if reserves[b.Attempt] != nil {
				return faultf("%s: attempt %s reserved twice", where, b.Attempt)
			}
			reserves[b.Attempt] = &reserve{rec: b}
			events[b.Controller] = append(events[b.Controller], event{b.Ledger, -int64(b.Charge)})
		case kindNotSent:
			var b recNotSent
			if err := decode(r, &b); err != nil {
				return faultf("%s: %v", where, err)
			}
			res := reserves[b.Attempt]
			if res == nil || res.released {
				return faultf("%s: releases attempt %s, which holds no reservation", where, b.Attempt)
			}
			if err := seeLedger(b.Ledger, r.Seq); err != nil {
				return err
			}
			res.released = true
			events[res.rec.Controller] = append(events[res.rec.Controller], event{b.Ledger, int64(res.rec.Charge)})
		case kindOutcome:
			var b recOutcome
			if err := decode(r, &b); err != nil {
				return faultf("%s: %v", where, err)
			}
			rc, err := msg.VerifyReceipt(b.Receipt, ring)
			if err != nil {
				return faultf("receipt in %s: %v", where, err)
			}
			res := reserves[b.Attempt]
			switch {
			case res == nil || res.released:
				return faultf("receipt %d (%s): attempt %s has no reservation", rc.Seq, where, b.Attempt)
			case rc.Attempt != b.Attempt || rc.Seq != b.Seq:
				return faultf("receipt %d (%s): names attempt %s, receipt %d; the record says %s, %d", rc.Seq, where, rc.Attempt, rc.Seq, b.Attempt, b.Seq)
			case rc.Controller != res.rec.Controller || rc.Application != res.rec.Application ||
				rc.Operation != res.rec.Operation || rc.Kind != res.rec.Kind || !bytes.Equal(rc.RequestSHA256, res.rec.RequestSHA256):
				return faultf("receipt %d (%s): does not match the reservation of attempt %s", rc.Seq, where, b.Attempt)
			case rc.Charge != res.rec.Charge:
				return faultf("receipt %d (%s): charges %d, the reservation was %d", rc.Seq, where, rc.Charge, res.rec.Charge)
			case rc.Status != b.Status:
				return faultf("receipt %d (%s): status %d, the recorded answer is %d", rc.Seq, where, rc.Status, b.Status)
			case !bytes.Equal(rc.Consent, res.rec.Consent):
				return faultf("receipt %d (%s): its payer consent is not the reserved one", rc.Seq, where)
			}
			if sum := sha256.Sum256(b.Body); !bytes.Equal(rc.ResponseSHA256, sum[:]) {
				return faultf("receipt %d (%s): the response hash does not match the recorded answer", rc.Seq, where)
			}
			if rc.Charge > 0 {
				dk := ctrls[rc.Controller]
				if dk == nil {
					return faultf("receipt %d (%s): unknown controller %s", rc.Seq, where, rc.Controller)
				}
				if _, err := msg.VerifyConsent(rc.Consent, dk, msg.Reserve{Attempt: rc.Attempt, Controller: rc.Controller,
					Application: rc.Application, Operation: rc.Operation, RequestSHA256: rc.RequestSHA256, Charge: rc.Charge}); err != nil {
					return faultf("receipt %d (%s): %v", rc.Seq, where, err)
				}
			} else if rc.Consent != nil {
				return faultf("receipt %d (%s): a free request carries a consent", rc.Seq, where)
			}
			rs = append(rs, chainReceipt{signed: b.Receipt, r: rc, where: where, order: int(r.Seq)})
			checks[rc.Controller] = append(checks[rc.Controller], balanceCheck{b.Ledger, rc.BalanceAfter, rc.Seq, where})
		case kindCheckpoint:
			var b recCheckpoint
			if err := decode(r, &b); err != nil {
				return faultf("%s: %v", where, err)
			}
			cps = append(cps, chainCheckpoint{signed: b.Checkpoint, where: where, order: int(r.Seq)})
		}
		return nil
	})
	if err != nil {
		return ReceiptReport{}, err
	}
	rep, err := verifyChain(rs, cps, s.pub, from)
	if err != nil {
		return rep, err
	}
	// The purse arithmetic, in ledger order, per controller.
	for _, name := range ctrlOrder {
		evs, cks := events[name], checks[name]
		sort.Slice(evs, func(i, j int) bool { return evs[i].ledger < evs[j].ledger })
		sort.Slice(cks, func(i, j int) bool { return cks[i].ledger < cks[j].ledger })
		pr := PurseReport{Controller: name, Receipts: len(cks)}
		var bal int64
		e := 0
		for _, ck := range cks {
			for ; e < len(evs) && evs[e].ledger <= ck.ledger; e++ {
				bal += evs[e].delta
			}
			if bal < 0 || uint64(bal) != ck.balance {
				return rep, faultf("receipt %d (%s): balance after is %d, but the purse history of %s gives %d", ck.seq, ck.where, ck.balance, name, bal)
			}
		}
		for _, ev := range evs {
			if ev.delta > 0 {
				pr.Funded += uint64(ev.delta)
			} else {
				pr.Charged += uint64(-ev.delta)
			}
		}
		for _, res := range reserves {
			if res.released && res.rec.Controller == name {
				// a release is a positive event: count it back out of Funded
				pr.Funded -= res.rec.Charge
				pr.Charged -= res.rec.Charge
			}
		}
		pr.Balance = int64(pr.Funded) - int64(pr.Charged)
		rep.Purses = append(rep.Purses, pr)
	}
	return rep, nil
}

// ReceiptsFile is what `receipts export` writes: the host's public key, the
// signed receipts in chain order and the signed checkpoints.
type ReceiptsFile struct {
	HostKey     []byte   `cbor:"hostKey"`
	Receipts    [][]byte `cbor:"receipts"`
	Checkpoints [][]byte `cbor:"checkpoints"`
}

// ExportReceipts returns a ReceiptsFile (CBOR) of the store's receipts and
// checkpoints, after verifying them.
func (s *Store) ExportReceipts() ([]byte, error) {
	if _, err := s.VerifyReceipts(1); err != nil {
		return nil, err
	}
	type item struct {
		seq    uint64
		signed []byte
	}
	var rs []item
	f := ReceiptsFile{HostKey: s.pub.MarshalCOSEKey()}
	err := s.j.Iterate(1, func(r journal.Record) error {
		switch r.Kind {
		case kindOutcome:
			var b recOutcome
			if err := decode(r, &b); err != nil {
				return err
			}
			rs = append(rs, item{b.Seq, b.Receipt})
		case kindCheckpoint:
			var b recCheckpoint
			if err := decode(r, &b); err != nil {
				return err
			}
			f.Checkpoints = append(f.Checkpoints, b.Checkpoint)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].seq < rs[j].seq })
	for _, it := range rs {
		f.Receipts = append(f.Receipts, it.signed)
	}
	return wire.Marshal(f)
}

// VerifyReceiptsFile checks an exported receipts file: every receipt's
// signature and chain link and every checkpoint. It carries its own host
// key: pass pinned to require a particular one (nil trusts the file's).
// Checkpoints come after the receipts in a file, so coverage means only
// that each names a receipt of the chain.
func VerifyReceiptsFile(b []byte, pinned *wire.HybridPublicKey) (ReceiptReport, error) {
	var f ReceiptsFile
	if err := wire.Unmarshal(b, &f); err != nil {
		return ReceiptReport{}, faultf("receipts file: %v", err)
	}
	pub, err := wire.ParseHybridPublicKey(f.HostKey)
	if err != nil {
		return ReceiptReport{}, faultf("receipts file: host key: %v", err)
	}
	if pinned != nil && !pinned.Equal(pub) {
		return ReceiptReport{}, faultf("receipts file: the host key %s is not the pinned key %s", pub.KID(), pinned.KID())
	}
	ring := wire.NewKeyring(pub.Ed25519())
	rs := make([]chainReceipt, 0, len(f.Receipts))
	for i, signed := range f.Receipts {
		where := fmt.Sprintf("file entry %d", i+1)
		r, err := msg.VerifyReceipt(signed, ring)
		if err != nil {
			return ReceiptReport{}, faultf("receipt (%s): %v", where, err)
		}
		rs = append(rs, chainReceipt{signed: signed, r: r, where: where, order: i})
	}
	cps := make([]chainCheckpoint, 0, len(f.Checkpoints))
	for i, signed := range f.Checkpoints {
		cps = append(cps, chainCheckpoint{signed: signed, where: fmt.Sprintf("file checkpoint %d", i+1), order: len(rs)})
	}
	return verifyChain(rs, cps, pub, 1)
}
