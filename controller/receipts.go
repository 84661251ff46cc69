package controller

import (
	"bytes"
	"fmt"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire/msg"
)

// checkEndReceipt checks the receipt of a dispatch result that ended the
// attempt (definite, refused or not-sent): it is the pinned host's, for
// this attempt, request and controller; it says the outcome the result
// says (a version 2 receipt; a version 1 receipt only for an answer); its
// own terms hold (msg.Receipt.CheckTerms: the price a 4xx applied, a
// refusal charging nothing); an answer's receipt matches the answer; and
// its charge is one the payer's consent allows (checkReceiptConsent); it
// names the ask the attempt awaited, and none for one that awaited none.
func (c *Controller) checkEndReceipt(p *plan, r msg.DispatchResult) (msg.Receipt, error) {
	var rc msg.Receipt
	var err error
	if r.Outcome == msg.StateDefinite {
		rc, err = c.verifyReceipt(r.Receipt, r.Attempt, p.sha[:], r.Body, r.Status)
	} else {
		rc, err = c.verifyEndReceipt(r.Receipt, r.Attempt, p.sha[:])
	}
	if err != nil {
		return rc, err
	}
	if err := receiptSays(rc, r.Outcome); err != nil {
		return rc, err
	}
	if err := checkRedeliveredBy(rc, ""); err != nil {
		return rc, err // a dispatch's own answer is a first delivery
	}
	if err := checkReceiptAsk(rc, p.ask); err != nil {
		return rc, err
	}
	b := ledger.Begin{Attempt: r.Attempt, Application: p.application, Operation: p.operation,
		RequestSHA256: p.sha[:], Principal: p.principal, Agent: p.principal, ConversationID: p.conversationID}
	if err := receiptNamesCaller(rc, b); err != nil {
		return rc, err
	}
	if r.Outcome == msg.StateRefused && rc.Consent == nil {
		// A consent this controller signed may never have reached the host
		// (its reverse channel failed, or its wait ended first): a refusal
		// that charges nothing needs none.
		return rc, nil
	}
	return rc, c.checkReceiptConsent(rc, b)
}

// receiptNamesCaller checks the agent and conversation a receipt names
// against the attempt's begin: the host signs the dispatch's agent and the
// invocation's conversationId into it (a host before agents names
// neither, and its receipt still verifies).
func receiptNamesCaller(rc msg.Receipt, b ledger.Begin) error {
	switch {
	case rc.Agent != "" && rc.Agent != b.Owner():
		return fmt.Errorf("receipt names agent %q, the attempt's is %q", rc.Agent, b.Owner())
	case rc.Conversation != "" && rc.Conversation != b.ConversationID:
		return fmt.Errorf("receipt names conversation %q, the attempt's is %q", rc.Conversation, b.ConversationID)
	}
	return nil
}

// checkRedeliveredBy checks the resolver a receipt of an answer names
// against redeliveredBy, what the host's inspect says of the attempt
// (msg.InspectResult.RedeliveredBy): an answer to an operator's
// redelivery names its resolver, a first delivery names none.
func checkRedeliveredBy(rc msg.Receipt, redeliveredBy string) error {
	if rc.ResolvedBy != redeliveredBy {
		return fmt.Errorf("receipt %d names resolver %q; the host says the attempt was redelivered by %q", rc.Seq, rc.ResolvedBy, redeliveredBy)
	}
	return nil
}

// receiptSays checks that a receipt's outcome is want and its terms hold.
func receiptSays(rc msg.Receipt, want msg.State) error {
	if err := rc.CheckTerms(); err != nil {
		return fmt.Errorf("receipt %d: %w", rc.Seq, err)
	}
	got := rc.Outcome
	if rc.V == 0 {
		got = msg.StateDefinite // version 1: written only for answers
	}
	if got != want {
		return fmt.Errorf("receipt %d says %s, the host's answer says %s", rc.Seq, got, want)
	}
	return nil
}

// verifyEndReceipt checks the receipt of an end without an answer (refused,
// not-sent) against the host key: this attempt, request and controller, and
// no response.
func (c *Controller) verifyEndReceipt(signed []byte, attempt string, reqSHA []byte) (msg.Receipt, error) {
	rc, err := msg.VerifyReceipt(signed, c.bind.HostRing)
	if err != nil {
		return rc, err
	}
	switch {
	case rc.Attempt != attempt:
		return rc, fmt.Errorf("receipt is for attempt %s", rc.Attempt)
	case !bytes.Equal(rc.RequestSHA256, reqSHA):
		return rc, fmt.Errorf("receipt request hash does not match the journaled begin")
	case rc.ResponseSHA256 != nil || rc.Status != 0:
		return rc, fmt.Errorf("receipt of an end without an answer names a response")
	case rc.Controller != c.cfg.Name:
		return rc, fmt.Errorf("receipt is for controller %q", rc.Controller)
	}
	return rc, nil
}

// checkInspectedEnd checks the receipt, when there is one, of an attempt
// the host reports refused or not-sent (inspect): as one in a dispatch
// answer, for b's attempt, request and principal. It returns the receipt
// to journal with the resolution (nil for a host that signs none).
func (c *Controller) checkInspectedEnd(b ledger.Begin, ir msg.InspectResult) ([]byte, error) {
	if ir.Receipt == nil {
		return nil, nil
	}
	rc, err := c.verifyEndReceipt(ir.Receipt, b.Attempt, b.RequestSHA256)
	if err == nil {
		err = receiptSays(rc, ir.State)
	}
	if err == nil {
		err = c.checkReceiptConsent(rc, b)
	}
	if err != nil {
		c.log.Error("RECEIPT REFUSED: the host's record of an uncertain attempt carries a receipt that does not verify", "attempt", b.Attempt, "err", err)
		return nil, err
	}
	return ir.Receipt, nil
}
