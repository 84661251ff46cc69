package operator

import (
	"fmt"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// Receipts form a hash chain, and receipt N+1 is signed on top of N while
// N's record may still be on its way to the disk. Two rules keep the chain
// on disk whole: every signed receipt's record takes its place in the
// journal in chain order (signReceiptLocked takes the receipt turn and
// appendReceipt gives it up once the record is framed), and a receipt
// record that is not written stops the host journal for good
// (journal.AppendLinked) before any later one can land; the host then
// exits, and after the restart the attempt is a reservation without an
// outcome: uncertain, its charge held, nothing charged twice.

// signReceiptLocked completes r as the next link of the receipt chain
// (version, sequence, previous hash, time), signs it and makes it the
// signed head. Called with s.mu held, so that receipts are signed in chain
// order. It takes the receipt turn, which appendReceipt gives up: the
// caller must pass the signed bytes to appendReceipt at once (without
// taking s.mu again before it, which would deadlock with the next signer),
// in the record that ends the attempt, and, once that append returned
// without an error, call receiptDurable with the returned sequence and
// head: checkpoints cover only durable receipts. On an error nothing is
// signed and the turn is given up here.
func (s *Store) signReceiptLocked(r msg.Receipt) (signed []byte, seq uint64, head []byte, err error) {
	s.receiptTurn.Lock()
	st := s.st
	r.V = msg.ReceiptV2
	r.Seq, r.Prev = st.signedSeq+1, st.signedHead
	r.At = s.clockLocked().UnixMilli()
	signed, err = msg.SignReceipt(s.key.Ed25519(), r)
	if err != nil {
		s.receiptTurn.Unlock()
		return nil, 0, nil, err
	}
	head = msg.ReceiptHash(signed)
	st.signedSeq, st.signedHead = r.Seq, head
	return signed, r.Seq, head, nil
}

// receiptDurable records that receipt seq (with chain hash head) is in the
// journal, and wakes the checkpoint loop. Takes s.mu.
func (s *Store) receiptDurable(seq uint64, head []byte) {
	s.mu.Lock()
	s.st.markDurable(seq, head)
	s.mu.Unlock()
	s.daemon.ReceiptDurable()
}

// appendReceipt journals a record that carries the receipt signReceiptLocked
// just signed, and gives up the receipt turn once the record has its place
// in the log. Every record that ends an attempt with a receipt goes through
// here: a receipt is a link of the chain, and later receipts are signed on
// top of it. If the record is not written the journal stops for good
// (journal.AppendLinked): the error matches journal.ErrFailed, and also
// journal.ErrNotWritten when the record is known not to be on disk. Either
// way the attempt is uncertain to the agent: the call was made, and after
// the restart the host holds its reservation without an outcome.
func (s *Store) appendReceipt(kind string, body any) (uint64, error) {
	if s.readOnly {
		s.receiptTurn.Unlock()
		return 0, fmt.Errorf("store %s is open read-only", s.dir)
	}
	return s.j.AppendLinked(kind, body, s.receiptTurn.Unlock)
}

// Checkpoint signs and journals a checkpoint over the durable receipt
// chain head, if it moved since the last one: the running host does so
// at most once a second after outcomes (package host), and once more at
// shutdown.
func (s *Store) Checkpoint() error {
	s.mu.Lock()
	seq, head, done := s.st.durableSeq, s.st.durableHead, s.st.checkpoint
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
	if seq > s.st.checkpoint {
		s.st.checkpoint = seq
	}
	s.mu.Unlock()
	return nil
}
