package operator

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

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
	_, rep, err := s.auditReceipts(from)
	return rep, err
}

// auditReceipts is VerifyReceipts, returning also the evidence it gathered.
func (s *Store) auditReceipts(from uint64) (*journalAudit, ReceiptReport, error) {
	a := newJournalAudit(s.hostRing)
	if err := s.j.Iterate(1, a.record); err != nil {
		return nil, ReceiptReport{}, err
	}
	rep, err := verifyChain(a.receipts, a.checkpoints, s.pub, from)
	if err != nil {
		return nil, rep, err
	}
	rep.Purses, err = a.purses()
	if err != nil {
		return nil, rep, err
	}
	return a, rep, nil
}

// ReceiptsFile is what `receipts export` writes: the host's public key, the
// signed receipts in chain order and the signed checkpoints.
type ReceiptsFile struct {
	HostKey     []byte   `cbor:"hostKey"`
	Receipts    [][]byte `cbor:"receipts"`
	Checkpoints [][]byte `cbor:"checkpoints"`
}

// ExportReceipts returns a ReceiptsFile (CBOR) of the store's receipts and
// checkpoints, after verifying them: the receipts that verify gathered, in
// chain order, and the checkpoints in journal order.
func (s *Store) ExportReceipts() ([]byte, error) {
	a, _, err := s.auditReceipts(1)
	if err != nil {
		return nil, err
	}
	rs := a.receipts
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].r.Seq < rs[j].r.Seq }) // chain order
	f := ReceiptsFile{HostKey: s.pub.MarshalCOSEKey()}
	for _, c := range rs {
		f.Receipts = append(f.Receipts, c.signed)
	}
	for _, cp := range a.checkpoints {
		f.Checkpoints = append(f.Checkpoints, cp.signed)
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
