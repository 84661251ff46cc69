package operator

import (
	"github.com/stewardrt/steward/wire/msg"
)

// signReceiptLocked completes r as the next link of the receipt chain
// (version, sequence, previous hash, time), signs it and makes it the
// signed head. Called with s.mu held, so that receipts are signed in chain
// order. The caller journals the signed bytes in the record that ends the
// attempt and, once that append returned, calls receiptDurable with the
// returned sequence and head: checkpoints cover only durable receipts.
func (s *Store) signReceiptLocked(r msg.Receipt) (signed []byte, seq uint64, head []byte, err error) {
	st := s.st
	r.V = msg.ReceiptV2
	r.Seq, r.Prev = st.signedSeq+1, st.signedHead
	r.At = s.clockLocked().UnixMilli()
	signed, err = msg.SignReceipt(s.key.Ed25519(), r)
	if err != nil {
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
	wake := s.wake
	s.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// appendReceipt journals a record that carries a signed receipt. Every
// record that ends an attempt with a receipt goes through here: a receipt
// is a link of the chain, and later receipts are signed on top of it.
func (s *Store) appendReceipt(kind string, body any) (uint64, error) {
	return s.append(kind, body)
}
