package msg

import (
	"crypto/sha256"
	"fmt"

	"github.com/stewardrt/steward/wire"
)

// ReceiptV2 is the version of receipts that name how the attempt ended.
// A receipt without "v" is version 1: the first format, written only for
// an application's answer (Outcome StateDefinite, the answer price or
// nothing charged); it still reads and verifies.
const ReceiptV2 = 2

// Which price a receipt's charge applied (Receipt.PriceApplied).
const (
	PriceAnswer  = "answer"  // the consent's answer price: a 2xx answer
	PriceRefusal = "refusal" // the consent's refusal price: any other status
	PriceNone    = "none"    // nothing charged
)

// Receipt is the host's signed account of how one attempt ended after
// admission. Receipts form a hash chain: Prev is ReceiptHash of the
// previous signed receipt (32 zero bytes for the first), so removing,
// reordering or altering one breaks every later link.
//
// Version 2 (V is ReceiptV2) is signed for every end after admission:
// Outcome is StateDefinite (the application answered; Status is its
// status), StateRefused (steward refused before anything was sent: the
// payer's consent did not come, or the admission failed at the last
// moment), StateNotSent (delivery failed before the first byte),
// StateReleased (the operator stated the request was not performed) or
// StatePerformed (the operator stated it was performed and no answer was
// recorded). Reason is one line on every outcome but an answer. A receipt
// without Consent either needed none (a free request) or never reached it;
// Reason says which. The agents and approvals work adds its fields the
// same way: optional, omitted when empty, so every older receipt keeps its
// bytes.
type Receipt struct {
	V              int    `cbor:"v,omitempty"` // ReceiptV2; absent in version 1
	Seq            uint64 `cbor:"seq"`
	Prev           []byte `cbor:"prev"`
	Attempt        string `cbor:"attempt"`
	Controller     string `cbor:"controller"`
	Application    string `cbor:"application"`
	Operation      string `cbor:"operation"`
	Kind           string `cbor:"kind"`
	RequestSHA256  []byte `cbor:"requestSha256"`
	ResponseSHA256 []byte `cbor:"responseSha256"`
	Status         int    `cbor:"status"`
	Charge         uint64 `cbor:"charge"`
	BalanceAfter   uint64 `cbor:"balanceAfter"`
	Consent        []byte `cbor:"consent"` // the payer's signed Consent; nil for a free request
	At             int64  `cbor:"at"`
	// Version 2 only.
	Outcome      State  `cbor:"outcome,omitempty"`
	Reason       string `cbor:"reason,omitempty"`
	PriceApplied string `cbor:"priceApplied,omitempty"` // PriceAnswer, PriceRefusal or PriceNone
	ResolvedBy   string `cbor:"resolvedBy,omitempty"`   // the account that resolved the attempt, e.g. "uid:1001"
	Deadline     int64  `cbor:"deadline,omitempty"`     // the dispatch's deadline, unix ms, when it carried one
	// Agent is the dispatch's agent (Dispatch.Agent), Conversation the
	// invocation's conversationId: who spent, and in which conversation.
	Agent        string `cbor:"agent,omitempty"`
	Conversation string `cbor:"conversation,omitempty"`
	// Ask is the ask an attempt on an operation marked for approval went
	// through, AnsweredBy who decided it ("uid:N" of a human approver,
	// "agent:NAME" of an advisor, "expiry" for an on-timeout verdict).
	// Omitted for an operation not marked.
	Ask        string `cbor:"ask,omitempty"`
	AnsweredBy string `cbor:"answeredBy,omitempty"`
}

// ReceiptHash is the chain link of a signed receipt: SHA-256 of its COSE bytes.
func ReceiptHash(signed []byte) []byte {
	h := sha256.Sum256(signed)
	return h[:]
}

// SignReceipt signs r with the host's Ed25519 key.
func SignReceipt(k *wire.SigningKey, r Receipt) ([]byte, error) {
	b, err := wire.Marshal(r)
	if err != nil {
		return nil, err
	}
	return wire.Sign1(k, b)
}

// VerifyReceipt checks a signed receipt against the host's pinned key.
func VerifyReceipt(signed []byte, host *wire.Keyring) (Receipt, error) {
	payload, _, err := wire.Verify1(signed, host)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipt: %w", err)
	}
	var r Receipt
	if err := wire.Unmarshal(payload, &r); err != nil {
		return Receipt{}, fmt.Errorf("receipt: %w", err)
	}
	return r, nil
}

// Checkpoint signs the head of the receipt chain with the operator's hybrid
// key, so that every receipt up to Seq is covered by a post-quantum signature.
type Checkpoint struct {
	Seq  uint64 `cbor:"seq"`  // the receipt sequence of the head
	Head []byte `cbor:"head"` // ReceiptHash of that receipt
	At   int64  `cbor:"at"`
}

// SignCheckpoint signs c with the operator's hybrid key.
func SignCheckpoint(k *wire.HybridSigningKey, c Checkpoint) ([]byte, error) {
	return signHybrid(k, c)
}

// VerifyCheckpoint checks both signatures of a checkpoint.
func VerifyCheckpoint(signed []byte, pub *wire.HybridPublicKey) (Checkpoint, error) {
	var c Checkpoint
	err := verifyHybrid(signed, pub, &c, "checkpoint")
	return c, err
}

func signHybrid(k *wire.HybridSigningKey, v any) ([]byte, error) {
	b, err := wire.Marshal(v)
	if err != nil {
		return nil, err
	}
	return wire.SignHybrid(k, b)
}

func verifyHybrid(signed []byte, pub *wire.HybridPublicKey, v any, what string) error {
	payload, err := wire.VerifyHybrid(signed, pub)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := wire.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ReceiptsFile is what `steward-operator receipts export` writes: the
// host's public key as it claims it, every signed receipt in chain order
// and every signed checkpoint. Both sides read it: the operator's
// `receipts verify --file` and the controller's `receipts compare`, each
// against a host key it pinned itself, never the file's. Encode and decode
// it with MarshalReceiptsFile and UnmarshalReceiptsFile: a CBOR array holds
// at most wire.MaxEntries items, so a longer list goes out in pages.
type ReceiptsFile struct {
	HostKey     []byte   `cbor:"hostKey"`
	Receipts    [][]byte `cbor:"receipts"`
	Checkpoints [][]byte `cbor:"checkpoints"`
}

// receiptsFilePaged is the file's form when either list is longer than
// wire.MaxEntries: pages of at most wire.MaxEntries each. A file whose lists
// both fit keeps the first form, byte for byte.
type receiptsFilePaged struct {
	HostKey         []byte     `cbor:"hostKey"`
	ReceiptPages    [][][]byte `cbor:"receiptPages"`
	CheckpointPages [][][]byte `cbor:"checkpointPages"`
}

// MarshalReceiptsFile encodes f, in pages when a list needs them.
func MarshalReceiptsFile(f ReceiptsFile) ([]byte, error) {
	if len(f.Receipts) <= wire.MaxEntries && len(f.Checkpoints) <= wire.MaxEntries {
		return wire.Marshal(f)
	}
	return wire.Marshal(receiptsFilePaged{HostKey: f.HostKey, ReceiptPages: pages(f.Receipts), CheckpointPages: pages(f.Checkpoints)})
}

// UnmarshalReceiptsFile decodes either form strictly.
func UnmarshalReceiptsFile(b []byte) (ReceiptsFile, error) {
	var f ReceiptsFile
	err := wire.Unmarshal(b, &f)
	if err == nil {
		return f, nil
	}
	var p receiptsFilePaged
	if perr := wire.Unmarshal(b, &p); perr != nil {
		return ReceiptsFile{}, err
	}
	f = ReceiptsFile{HostKey: p.HostKey}
	for _, pg := range p.ReceiptPages {
		f.Receipts = append(f.Receipts, pg...)
	}
	for _, pg := range p.CheckpointPages {
		f.Checkpoints = append(f.Checkpoints, pg...)
	}
	return f, nil
}

func pages(items [][]byte) [][][]byte {
	out := [][][]byte{}
	for len(items) > 0 {
		n := min(len(items), wire.MaxEntries)
		out = append(out, items[:n])
		items = items[n:]
	}
	return out
}
