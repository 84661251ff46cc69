package audit

import (
	"bytes"
	"encoding/hex"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// receiptChain links a journal's receipts as their records come, so that
// the audit carries the chain's end, never the chain: the receipts
// linked so far (1..linked), the last one's hash, the receipts seen
// ahead of a gap (journal order may differ from chain order within a
// group-commit batch), and the hashes of the last recentWindow receipts,
// which a checkpoint recorded later may cover. A fault of the chain or of
// a checkpoint is kept, the first of each, and reported after the faults
// of the records (finish), as the whole-chain check reported them.
type receiptChain struct {
	linked  uint64
	head    []byte // hash of receipt linked (32 zero bytes before receipt 1)
	pending map[uint64]chainReceipt
	// recent holds the hashes of receipts recentFirst..linked.
	recent      [][]byte
	recentFirst uint64
	checkpoints int
	covered     uint64
	covering    *CheckpointView
	// early are checkpoints recorded before every receipt they cover was:
	// each a fault once the chain reaches it (or at the end).
	early []earlyCheckpoint

	fault, cpFault error
}

// earlyCheckpoint is a verified checkpoint over a receipt not yet linked
// when it was recorded.
type earlyCheckpoint struct {
	cp    chainCheckpoint
	c     msg.Checkpoint
	where string
}

// recentWindow is how many of the last receipts' hashes the chain keeps
// for checkpoints to come: the host checkpoints the durable head at most
// a second after it moves, so what a checkpoint covers is among the
// receipts linked in that second. One over an older receipt is a fault.
const recentWindow = 4096

func newReceiptChain() *receiptChain {
	return &receiptChain{head: make([]byte, 32), pending: map[uint64]chainReceipt{}, recentFirst: 1}
}

// add takes a receipt verified by its record's step, linking it and those
// it frees when it is the next, keeping it when it comes ahead of a gap.
func (ch *receiptChain) add(c chainReceipt, linkedFn func(chainReceipt)) {
	if ch.fault != nil {
		return
	}
	s := c.r.Seq
	if _, dup := ch.pending[s]; dup || (s <= ch.linked && s > 0) {
		ch.fault = faultf("receipt %d (%s) appears twice", s, c.where)
		return
	}
	if s != ch.linked+1 {
		ch.pending[s] = c
		return
	}
	for {
		if !ch.link(c, linkedFn) {
			return
		}
		next, ok := ch.pending[ch.linked+1]
		if !ok {
			return
		}
		delete(ch.pending, ch.linked+1)
		c = next
	}
}

// link links receipt linked+1 and checks the early checkpoints over it.
func (ch *receiptChain) link(c chainReceipt, linkedFn func(chainReceipt)) bool {
	if !bytes.Equal(c.r.Prev, ch.head) {
		ch.fault = faultf("receipt %d (%s): its link does not name receipt %d: the chain is broken", c.r.Seq, c.where, c.r.Seq-1)
		return false
	}
	ch.head = msg.ReceiptHash(c.signed)
	ch.linked = c.r.Seq
	ch.recent = append(ch.recent, ch.head)
	if len(ch.recent) > recentWindow {
		ch.recent = append([][]byte(nil), ch.recent[len(ch.recent)-recentWindow:]...)
		ch.recentFirst = ch.linked - recentWindow + 1
	}
	linkedFn(c)
	kept := ch.early[:0]
	for _, e := range ch.early {
		if e.c.Seq != ch.linked {
			kept = append(kept, e)
			continue
		}
		if ch.cpFault == nil {
			if !bytes.Equal(e.c.Head, ch.head) {
				ch.cpFault = faultf("checkpoint (%s): its head is not receipt %d", e.where, e.c.Seq)
			} else {
				ch.cpFault = faultf("checkpoint (%s) covers receipt %d, which was recorded after it", e.where, e.c.Seq)
			}
		}
	}
	ch.early = kept
	return true
}

// checkpoint verifies a checkpoint record's signature and what it covers:
// a receipt linked before it, whose hash is its head.
func (ch *receiptChain) checkpoint(cp chainCheckpoint, host *wire.HybridPublicKey) {
	ch.checkpoints++
	if ch.cpFault != nil {
		return
	}
	c, err := msg.VerifyCheckpoint(cp.signed, host)
	if err != nil {
		ch.cpFault = faultf("checkpoint (%s): %v", cp.where, err)
		return
	}
	switch {
	case c.Seq == 0 || c.Seq > ch.linked:
		ch.early = append(ch.early, earlyCheckpoint{cp: cp, c: c, where: cp.where})
		return
	case c.Seq < ch.recentFirst:
		ch.cpFault = faultf("checkpoint (%s) covers receipt %d, more than %d receipts before the chain's end (receipt %d) when it was recorded", cp.where, c.Seq, recentWindow, ch.linked)
		return
	case !bytes.Equal(c.Head, ch.recent[c.Seq-ch.recentFirst]):
		ch.cpFault = faultf("checkpoint (%s): its head is not receipt %d", cp.where, c.Seq)
		return
	}
	if c.Seq > ch.covered {
		ch.covered = c.Seq
		ch.covering = &CheckpointView{Seq: c.Seq, Head: hex.EncodeToString(c.Head), At: c.At}
	}
}

// finish is the chain's report, or its first fault: a receipt missing
// before one seen, then a checkpoint's fault, then a checkpoint over a
// receipt there is not. It changes nothing, so that a point can be taken
// after it.
func (ch *receiptChain) finish() (ReceiptReport, error) {
	if ch.fault != nil {
		return ReceiptReport{}, ch.fault
	}
	if len(ch.pending) > 0 {
		next := uint64(0)
		for s := range ch.pending {
			if next == 0 || s < next {
				next = s
			}
		}
		return ReceiptReport{}, faultf("receipt %d is missing (the next is receipt %d, %s)", ch.linked+1, next, ch.pending[next].where)
	}
	rep := ReceiptReport{Receipts: int(ch.linked), Checkpoints: ch.checkpoints, Head: hex.EncodeToString(ch.head),
		LastSeq: ch.linked, CoveredThrough: ch.covered, Covering: ch.covering, Uncovered: int(ch.linked - ch.covered)}
	if ch.cpFault != nil {
		return rep, ch.cpFault
	}
	if len(ch.early) > 0 {
		e := ch.early[0]
		return rep, faultf("checkpoint (%s) covers receipt %d, but there are %d receipts", e.where, e.c.Seq, ch.linked)
	}
	return rep, nil
}
