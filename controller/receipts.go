package controller

import (
	"bytes"
	"fmt"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire/msg"
)

// This file is every check the controller makes of a receipt the host
// signed before it takes it: from a dispatch's or a collect's answer
// (checkEndReceipt, verifyReceipt), and from inspect for an uncertain
// attempt (checkInspectedEnd, verifyResolutionReceipt), with the terms they
// share (the outcome, the caller, the resolver, the ask, the consent and
// the charge). A receipt that fails leaves its attempt uncertain: a
// dispatch's answer is then not trusted, an inspection not recorded.

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
	b := p.begin(r.Attempt)
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

// openReceipt verifies a signed receipt under the pinned host key and
// checks that it is the receipt of this attempt and request: what every
// receipt the controller takes is, whatever else its kind of end asks.
func (c *Controller) openReceipt(signed []byte, attempt string, reqSHA []byte) (msg.Receipt, error) {
	rc, err := msg.VerifyReceipt(signed, c.bind.HostRing)
	if err != nil {
		return rc, err
	}
	switch {
	case rc.Attempt != attempt:
		return rc, fmt.Errorf("receipt is for attempt %s", rc.Attempt)
	case !bytes.Equal(rc.RequestSHA256, reqSHA):
		return rc, fmt.Errorf("receipt request hash does not match the journaled begin")
	}
	return rc, nil
}

// verifyReceipt checks a signed receipt against the host key and that it
// is the receipt of this attempt, request and response.
func (c *Controller) verifyReceipt(signed []byte, attempt string, reqSHA, body []byte, status int) (msg.Receipt, error) {
	rc, err := c.openReceipt(signed, attempt, reqSHA)
	if err != nil {
		return rc, err
	}
	if err := receiptAnswers(rc, body, status); err != nil {
		return rc, err
	}
	if rc.Controller != c.cfg.Name {
		return rc, fmt.Errorf("receipt is for controller %q", rc.Controller)
	}
	return rc, nil
}

// receiptAnswers checks that receipt rc names the answer body with status.
func receiptAnswers(rc msg.Receipt, body []byte, status int) error {
	respSHA := sha(body)
	switch {
	case !bytes.Equal(rc.ResponseSHA256, respSHA[:]):
		return fmt.Errorf("receipt response hash does not match the answer")
	case rc.Status != status:
		return fmt.Errorf("receipt status %d does not match the answer's %d", rc.Status, status)
	}
	return nil
}

// verifyEndReceipt checks the receipt of an end without an answer (refused,
// not-sent) against the host key: this attempt, request and controller, and
// no response.
func (c *Controller) verifyEndReceipt(signed []byte, attempt string, reqSHA []byte) (msg.Receipt, error) {
	rc, err := c.openReceipt(signed, attempt, reqSHA)
	if err != nil {
		return rc, err
	}
	switch {
	case rc.ResponseSHA256 != nil || rc.Status != 0:
		return rc, fmt.Errorf("receipt of an end without an answer names a response")
	case rc.Controller != c.cfg.Name:
		return rc, fmt.Errorf("receipt is for controller %q", rc.Controller)
	}
	return rc, nil
}

// verifyResolutionReceipt checks the receipt of an operator's release or
// settlement on the host: signed by the pinned host key, for this attempt,
// request and controller, naming the resolution, its resolver and reason,
// no response, and charging 0 for a release or one of the consent's
// prices for a settlement.
func (c *Controller) verifyResolutionReceipt(ir msg.InspectResult, b ledger.Begin) (msg.Receipt, error) {
	rc, err := c.openReceipt(ir.Receipt, b.Attempt, b.RequestSHA256)
	if err != nil {
		return rc, err
	}
	switch {
	case rc.Controller != c.cfg.Name:
		return rc, fmt.Errorf("receipt is for controller %q", rc.Controller)
	case rc.Outcome != ir.State:
		return rc, fmt.Errorf("receipt outcome %q, the host reports %s", rc.Outcome, ir.State)
	case rc.ResolvedBy == "" || rc.Reason == "":
		return rc, fmt.Errorf("receipt of a resolution names no resolver or no reason")
	case rc.Status != 0 || rc.ResponseSHA256 != nil:
		return rc, fmt.Errorf("receipt of a resolution names a response")
	case ir.State == msg.StateReleased && rc.Charge != 0:
		return rc, fmt.Errorf("receipt of a release charges %d", rc.Charge)
	}
	return rc, c.checkReceiptConsent(rc, b)
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

// receiptNamesCaller checks the agent and conversation a receipt names
// against the attempt's begin: the host signs the dispatch's agent and the
// invocation's conversationId into it, the one the body carries (scoped
// per agent; a host before agents names neither, and its receipt still
// verifies).
func receiptNamesCaller(rc msg.Receipt, b ledger.Begin) error {
	switch {
	case rc.Agent != "" && rc.Agent != b.Owner():
		return fmt.Errorf("receipt names agent %q, the attempt's is %q", rc.Agent, b.Owner())
	case rc.Conversation != "" && rc.Conversation != b.AppConversationID():
		return fmt.Errorf("receipt names conversation %q, the attempt's is %q", rc.Conversation, b.AppConversationID())
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

// checkReceiptAsk checks the ask a receipt names against the one the
// attempt awaited (none when it never did).
func checkReceiptAsk(rc msg.Receipt, ask string) error {
	if rc.Ask != ask {
		if ask == "" {
			return fmt.Errorf("receipt names ask %q, the attempt awaited no approval", rc.Ask)
		}
		return fmt.Errorf("receipt names ask %q, the attempt awaited ask %q", rc.Ask, ask)
	}
	return nil
}

// checkReceiptConsent checks the charge and the consent of a verified
// receipt for b: a receipt without a consent charges nothing; one with a
// consent carries the consent this process signed for the attempt (the
// same bytes), or, for an attempt begun before a restart, a consent that
// the controller's own dispatch key signed for this attempt, request and
// principal; and it charges one of the consent's prices, or 0. The agent
// and conversation it names, if any, are the begin's.
func (c *Controller) checkReceiptConsent(rc msg.Receipt, b ledger.Begin) error {
	if err := receiptNamesCaller(rc, b); err != nil {
		return err
	}
	h, held := c.pay.held(b.Attempt)
	switch {
	case rc.Consent == nil && held:
		return fmt.Errorf("receipt carries no payer consent, though one was signed for attempt %s", b.Attempt)
	case rc.Consent == nil && rc.Charge != 0:
		return fmt.Errorf("receipt charges %d with no payer consent", rc.Charge)
	case rc.Consent == nil:
		return nil
	}
	cs := h.consent
	if held {
		if !bytes.Equal(rc.Consent, h.signed) {
			return fmt.Errorf("receipt carries a payer consent other than the one signed for attempt %s", b.Attempt)
		}
	} else {
		var err error
		if cs, err = msg.OpenConsent(rc.Consent, c.ownConsents); err != nil {
			return fmt.Errorf("receipt: %w", err)
		}
		if cs.Attempt != b.Attempt || cs.Controller != c.cfg.Name || cs.Application != b.Application ||
			cs.Operation != b.Operation || !bytes.Equal(cs.RequestSHA256, b.RequestSHA256) || cs.Principal != b.Principal {
			return fmt.Errorf("receipt carries a payer consent for another attempt, request or principal than attempt %s", b.Attempt)
		}
	}
	if !cs.Allows(rc.Charge) {
		return fmt.Errorf("receipt charges %d, the payer consented to %d for an answer and %d for a refusal", rc.Charge, cs.Charge, cs.RefusalPrice)
	}
	if err := rc.CheckCharge(cs); err != nil {
		return fmt.Errorf("receipt %w", err)
	}
	return nil
}
