package controller

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestCompareTwoConsentsOneRequest does what the attacker's host did: it
// answered not-seen for attempt a1, which it held a consent for, so the
// agent's requestId r1 was consented again for attempt a2, and the host
// then charged both. `receipts compare` on the crafted pair (the
// controller's journal as ReadReceipts reads it, the host's export) finds
// the two consents for one requestId; a requestId consented again after a
// receipt that charged nothing (not sent) is no finding, nor are two
// requestIds of one consent each.
func TestCompareTwoConsentsOneRequest(t *testing.T) {
	host, err := wire.GenerateHybridKey()
	if err != nil {
		t.Fatal(err)
	}
	disp, err := wire.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	read := ledger.ReceiptsRead{Recorded: map[string][]byte{}, Begun: map[string][]byte{}, Requests: map[string]ledger.RequestName{}}
	var file msg.ReceiptsFile
	prev := make([]byte, 32)
	seq := uint64(0)
	// receipt begins attempt id for the agent's requestId and signs the
	// host's receipt of its end, carrying this controller's consent.
	receipt := func(id, requestID string, outcome msg.State) {
		t.Helper()
		sum := sha256.Sum256([]byte("request " + requestID))
		read.Begun[id] = sum[:]
		read.Requests[id] = ledger.RequestName{Agent: "alice", Application: "appliance", RequestID: requestID}
		consent, err := msg.SignConsent(disp, msg.Consent{V: msg.CustodyV2, Attempt: id, Controller: "dev", Principal: "alice",
			Application: "appliance", Operation: "op", RequestSHA256: sum[:], Charge: 5})
		if err != nil {
			t.Fatal(err)
		}
		seq++
		rc := msg.Receipt{V: msg.ReceiptV2, Seq: seq, Prev: prev, Attempt: id, Controller: "dev", Application: "appliance", Operation: "op",
			Kind: msg.KindInvoke, RequestSHA256: sum[:], Consent: consent, Outcome: outcome, Agent: "alice"}
		if outcome == msg.StateDefinite {
			rc.Status, rc.Charge, rc.PriceApplied = 200, 5, msg.PriceAnswer
		} else {
			rc.PriceApplied, rc.Reason = msg.PriceNone, "the application could not be reached"
		}
		signed, err := msg.SignReceipt(host.Ed25519(), rc)
		if err != nil {
			t.Fatal(err)
		}
		prev = msg.ReceiptHash(signed)
		read.Recorded[id] = signed
		file.Receipts = append(file.Receipts, signed)
	}
	receipt("a1", "r1", msg.StateDefinite) // the attempt the host said it had not seen
	receipt("b1", "r2", msg.StateNotSent)  // not sent: a new call may follow
	receipt("b2", "r2", msg.StateDefinite)
	receipt("a2", "r1", msg.StateDefinite) // the second consent of r1
	receipt("c1", "r3", msg.StateDefinite)
	c := compareWith("dev", read, file, wire.NewKeyring(host.Ed25519().Public()), wire.NewKeyring(disp.Public()))
	want := fmt.Sprintf("requestId %q of agent alice (application appliance) was consented twice: attempt a1 (receipt 1, definite, charge 5) and attempt a2 (receipt 4, definite, charge 5); one consent a requestId", "r1")
	if len(c.Findings) != 1 || c.Findings[0] != want {
		t.Fatalf("findings %q, want [%q]", c.Findings, want)
	}
	if c.Matched != 5 || c.Exported != 5 {
		t.Fatalf("%+v", c)
	}
}
