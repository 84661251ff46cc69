package operator

import (
	"bytes"
	"fmt"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// The host journal's record kinds of an operator's resolution, and the
// reservation that keeps the request bytes a redelivery sends (see doc.go).
const (
	kindReserveV2 = "reserve.v2"
	kindRedeliver = "redeliver"
	kindResolve   = "resolve"
)

// recReserveV2 is a reservation that keeps the exact request (method,
// path, body; the body at most the invocation bound, as the checked
// dispatch holds it), so that an operator can redeliver the attempt. Its
// other fields are recReserve's, embedded: CBOR flattens them, so the
// body's keys are recReserve's and then these.
type recReserveV2 struct {
	recReserve
	Method string `cbor:"method"`
	Path   string `cbor:"path"`
	Body   []byte `cbor:"body"`
	// Agent is the dispatch's agent and Conversation its invoke body's
	// conversationId, omitted when empty (added in place: no host wrote
	// reserve.v2 before them). Replay counts the agent's limits by them.
	Agent        string `cbor:"agent,omitempty"`
	Conversation string `cbor:"conversation,omitempty"`
}

// v1 is the reservation without its request: what replay and the audit
// of the first version read.
func (b *recReserveV2) v1() *recReserve { return &b.recReserve }

// upgrade reads a first-version reservation as a reserve.v2 with no
// request: such an attempt can be released or charged, not redelivered.
func (b *recReserve) upgrade() *recReserveV2 { return &recReserveV2{recReserve: *b} }

// hasRequest reports whether the reservation kept its request bytes.
func (b *recReserveV2) hasRequest() bool { return b.Method != "" }

// request is the kept request.
func (b *recReserveV2) request() oracleops.Request {
	return oracleops.Request{Method: b.Method, Path: b.Path, Body: b.Body}
}

// recRedeliver is journaled before each redelivery an operator asks for,
// one a command, before the first byte is sent: who asked and why. The
// outcome that follows is an ordinary outcome record (or an uncertain one).
type recRedeliver struct {
	Attempt string `cbor:"attempt"`
	By      string `cbor:"by"`
	Reason  string `cbor:"reason"`
}

// recResolve ends an uncertain attempt by the operator's word, with its
// signed receipt: State msg.StateReleased (not performed: the reservation
// is released, charge 0) or msg.StatePerformed (performed, no answer
// recorded: the reservation is settled). Ledger is the release's ledger
// number, or the one current when a settling receipt was signed.
type recResolve struct {
	Attempt string    `cbor:"attempt"`
	State   msg.State `cbor:"state"`
	By      string    `cbor:"by"`
	Reason  string    `cbor:"reason"`
	Receipt []byte    `cbor:"receipt"`
	Seq     uint64    `cbor:"receiptSeq"`
	Ledger  uint64    `cbor:"ledger"`
}

// reserveV1 applies a first-version reservation (no request bytes).
func (rp *replayer) reserveV1(r journal.Record, b *recReserve) error {
	if err := rp.reserve(r, b); err != nil {
		return err
	}
	rp.st.attempts[b.Attempt].reserveSeq = r.Seq
	return nil
}

// reserveV2 applies a reservation that kept its request; the request
// stays in the journal, where a redelivery reads it.
func (rp *replayer) reserveV2(r journal.Record, b *recReserveV2) error {
	if err := checkKeptRequest(b); err != nil {
		return fmt.Errorf("attempt %s: %w", b.Attempt, err)
	}
	if b.Agent != "" {
		if err := validDispatchAgent(b.Agent); err != nil {
			return fmt.Errorf("attempt %s: %w", b.Attempt, err)
		}
	}
	if err := rp.reserveV1(r, b.v1()); err != nil {
		return err
	}
	// The agent's counts come from the journal: a restart refills none.
	a := rp.st.attempts[b.Attempt]
	a.agent, a.conversation = b.Agent, b.Conversation
	rp.st.agentHold(b.Controller, b.Agent, b.Conversation, b.Day, b.Charge)
	return nil
}

// checkKeptRequest checks that a reservation's request bytes are the
// request its hash names.
func checkKeptRequest(b *recReserveV2) error {
	if !b.hasRequest() {
		return fmt.Errorf("a reserve.v2 record without its request")
	}
	if sum := b.request().SHA256(); !bytes.Equal(sum[:], b.RequestSHA256) {
		return fmt.Errorf("the kept request does not hash to the reservation's request hash")
	}
	return nil
}

func (rp *replayer) redeliver(_ journal.Record, b *recRedeliver) error {
	a, err := rp.st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	a.resolution, a.redeliveredBy = redeliveredLine(b.By, b.Reason), b.By
	return nil
}

func (rp *replayer) resolve(r journal.Record, b *recResolve) error {
	st := rp.st
	a, err := st.attemptIn(b.Attempt, msg.StateUncertain)
	if err != nil {
		return err
	}
	switch b.State {
	case msg.StateReleased:
		st.release(a)
	case msg.StatePerformed:
	default:
		return fmt.Errorf("attempt %s: resolved to %q, which is neither %s nor %s", b.Attempt, b.State, msg.StateReleased, msg.StatePerformed)
	}
	if b.Seq <= st.durableSeq || st.pending[b.Seq] != nil {
		return fmt.Errorf("receipt %d appears twice", b.Seq)
	}
	a.state, a.outcomeSeq, a.detail = b.State, r.Seq, resolvedLine(b.State, b.By, b.Reason)
	st.markDurable(b.Seq, msg.ReceiptHash(b.Receipt))
	st.seeLedger(b.Ledger)
	return nil
}

// reserveV2 verifies a reservation that kept its request: the request
// must be the one it hashes, then it is audited as any reservation.
func (a *journalAudit) reserveV2(r journal.Record, b *recReserveV2) error {
	if err := checkKeptRequest(b); err != nil {
		return faultf("%s: attempt %s: %v", recordWhere(r), b.Attempt, err)
	}
	a.checkApproval(r, b)
	return a.reserve(r, b.v1())
}

// redeliver checks that a redelivery names an open reservation, and keeps
// its resolver for the receipt that ends it (endReceipt).
func (a *journalAudit) redeliver(r journal.Record, b *recRedeliver) error {
	res := a.reserves[b.Attempt]
	if res == nil || res.released || res.outcome {
		return faultf("%s: redelivers attempt %s, which holds no open reservation", recordWhere(r), b.Attempt)
	}
	res.redeliveredBy = b.By
	return nil
}

// resolve checks an operator's resolution and its receipt against the
// reservation: a release charges 0 and gives the charge back (a balance
// change at its ledger number), a settlement charges the reservation; both
// carry the reserved consent, the resolver and the reason, and name no
// response.
func (a *journalAudit) resolve(r journal.Record, b *recResolve) error {
	where := recordWhere(r)
	rc, err := msg.VerifyReceipt(b.Receipt, a.hostRing)
	if err != nil {
		return faultf("receipt in %s: %v", where, err)
	}
	res := a.reserves[b.Attempt]
	if res == nil || res.released || res.outcome {
		return faultf("receipt %d (%s): resolves attempt %s, which holds no open reservation", rc.Seq, where, b.Attempt)
	}
	want := res.rec.Charge
	if b.State == msg.StateReleased {
		want = 0
	}
	switch {
	case rc.V != msg.ReceiptV2 || rc.Outcome != b.State || (b.State != msg.StateReleased && b.State != msg.StatePerformed):
		return faultf("receipt %d (%s): outcome %q (version %d) for a resolution to %q", rc.Seq, where, rc.Outcome, rc.V, b.State)
	case rc.Attempt != b.Attempt || rc.Seq != b.Seq:
		return faultf("receipt %d (%s): names attempt %s, receipt %d; the record says %s, %d", rc.Seq, where, rc.Attempt, rc.Seq, b.Attempt, b.Seq)
	case rc.Controller != res.rec.Controller || rc.Application != res.rec.Application ||
		rc.Operation != res.rec.Operation || rc.Kind != res.rec.Kind || !bytes.Equal(rc.RequestSHA256, res.rec.RequestSHA256):
		return faultf("receipt %d (%s): does not match the reservation of attempt %s", rc.Seq, where, b.Attempt)
	case rc.Charge != want:
		return faultf("receipt %d (%s): a resolution to %s charges %d, want %d", rc.Seq, where, b.State, rc.Charge, want)
	case rc.ResolvedBy != b.By || b.By == "" || b.Reason == "":
		return faultf("receipt %d (%s): resolved by %q; the record says %q, with reason %q", rc.Seq, where, rc.ResolvedBy, b.By, b.Reason)
	case rc.Status != 0 || rc.ResponseSHA256 != nil:
		return faultf("receipt %d (%s): a resolution names a response", rc.Seq, where)
	case !bytes.Equal(rc.Consent, res.rec.Consent):
		return faultf("receipt %d (%s): its payer consent is not the reserved one", rc.Seq, where)
	}
	if b.State == msg.StateReleased {
		if err := a.claimLedger(b.Ledger, r.Seq); err != nil {
			return err
		}
		res.released = true
		a.events[res.rec.Controller] = append(a.events[res.rec.Controller], purseEvent{b.Ledger, int64(res.rec.Charge), eventRelease})
	} else {
		res.outcome = true
	}
	a.receipts = append(a.receipts, chainReceipt{signed: b.Receipt, r: rc, where: where, order: int(r.Seq)})
	a.checks[rc.Controller] = append(a.checks[rc.Controller], balanceCheck{b.Ledger, rc.BalanceAfter, rc.Seq, where})
	return nil
}
