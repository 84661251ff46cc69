package operator

import (
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// Receipts form a hash chain, and receipt N+1 is signed on top of N while
// N's record may still be on its way to the disk. Two rules keep the chain
// on disk whole: every signed receipt's record takes its place in the
// journal in chain order (commitEnd takes the receipt turn before it signs,
// and the journal gives it up once the record is framed), and a receipt
// record that is not written stops the host journal for good
// (journal.AppendLinked) before any later one can land; the host then
// exits, and after the restart the attempt is a reservation without an
// outcome: uncertain, its charge held, nothing charged twice. Every record
// that ends an attempt with a receipt goes through commitEnd.

// receiptEnd is one record that ends an attempt with its signed receipt,
// as commitEnd journals it. Every step runs with s.mu held.
type receiptEnd struct {
	kind string
	// receipt applies the end's balance change in memory (before its
	// append: doc.go, the ledger) and returns its receipt, without the
	// chain's fields.
	receipt func() msg.Receipt
	// record is the end's record, carrying the signed receipt (seq, its
	// sequence).
	record func(signed []byte, seq uint64) any
	// undo gives back what receipt applied: the receipt could not be
	// signed, or its record not appended.
	undo func()
	// apply records the end in the state once its record is in the
	// journal at at.
	apply func(at journal.Place)
	// appendFailed, when set, words the error of a failed append.
	appendFailed func(error) error
}

// commitEnd signs e's receipt as the next link of the receipt chain
// (version, sequence, previous hash, time), journals it in e's record and
// applies it; the receipt is durable once it returns without an error, and
// the checkpointer is woken for it. The receipt turn is held from the
// signing until the record has its place in the log, so receipts are
// signed and logged in one order; s.mu is given up for the append, which
// may wait for its group's fdatasync. If the append fails the journal has
// stopped (journal.ErrFailed, and journal.ErrNotWritten when the record is
// known not to be on disk): the attempt is uncertain to the agent.
func (s *Store) commitEnd(e receiptEnd) ([]byte, error) {
	if s.readOnly {
		return nil, fmt.Errorf("store %s is open read-only", s.dir)
	}
	s.mu.Lock()
	r := e.receipt()
	s.receiptTurn.Lock()
	st := s.st
	r.V = msg.ReceiptV2
	r.Seq, r.Prev = st.SignedSeq+1, st.SignedHead
	r.At = s.clockLocked().UnixMilli()
	signed, err := msg.SignReceipt(s.key.Ed25519(), r)
	if err != nil {
		s.receiptTurn.Unlock()
		e.undo()
		s.mu.Unlock()
		return nil, err
	}
	head := msg.ReceiptHash(signed)
	st.SignedSeq, st.SignedHead = r.Seq, head
	rec := e.record(signed, r.Seq)
	s.mu.Unlock()
	at, err := s.j.AppendLinkedAt(e.kind, rec, s.receiptTurn.Unlock)
	s.mu.Lock()
	if err != nil {
		e.undo()
		s.mu.Unlock()
		if e.appendFailed != nil {
			err = e.appendFailed(err)
		}
		return nil, err
	}
	e.apply(at)
	st.markDurable(r.Seq, head)
	s.mu.Unlock()
	s.daemon.ReceiptDurable()
	return signed, nil
}

// Checkpoint signs and journals a checkpoint over the durable receipt
// chain head, if it moved since the last one: the running host does so
// at most once a second after outcomes (package host), and once more at
// shutdown.
func (s *Store) Checkpoint() error {
	s.mu.Lock()
	seq, head, done := s.st.DurableSeq, s.st.DurableHead, s.st.Checkpoint
	s.mu.Unlock()
	if seq <= done {
		return nil
	}
	signed, err := msg.SignCheckpoint(s.key, msg.Checkpoint{Seq: seq, Head: head, At: s.clock().UnixMilli()})
	if err != nil {
		return err
	}
	if _, err := s.append(hostlog.KindCheckpoint, hostlog.Checkpoint{Checkpoint: signed, Seq: seq}); err != nil {
		return err
	}
	s.mu.Lock()
	if seq > s.st.Checkpoint {
		s.st.Checkpoint = seq
	}
	s.mu.Unlock()
	return nil
}
