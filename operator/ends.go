package operator

import (
	"crypto/sha256"
	"strings"
	"unicode/utf8"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The records that end an admitted attempt, each with its signed receipt
// (DESIGN.md section 5): an answer (commitOutcome), a delivery that failed
// before its first byte (commitNotSent) and a refusal before anything was
// reserved (commitRefused). Each signs under s.mu (signReceiptLocked),
// journals through appendReceipt and then calls receiptDurable, so that
// receipts are chained in signing order and checkpoints cover only durable
// ones. An attempt that stays uncertain has no receipt until the operator
// resolves it.

// isAnswer reports whether status is the application's success (2xx):
// the only status charged the answer price.
func isAnswer(status int) bool { return msg.IsAnswer(status) }

// refusalPrice is what an answer other than 2xx costs under adm: the
// grant's refusal price, never above the reservation (a discovery
// reserves its discovery price, which may be below the refusal price).
// The reserve asks the payer's consent to this price (Host.consent).
func (adm *admission) refusalPrice() uint64 { return min(adm.grant.RefusalPrice, adm.charge) }

// settlement is what an answer of status charges under adm and which price
// that applied: the reservation for a 2xx, the refusal price otherwise.
func (adm *admission) settlement(status int) (uint64, string) {
	if isAnswer(status) {
		return adm.charge, priceApplied(adm.charge, msg.PriceAnswer)
	}
	c := adm.refusalPrice()
	return c, priceApplied(c, msg.PriceRefusal)
}

// priceApplied names the price a receipt charging charge applied: which,
// or none when nothing is charged.
func priceApplied(charge uint64, which string) string { return msg.PriceFor(charge, which) }

// receiptOf is the receipt of admission adm for dispatch d, before the
// end's own fields and the chain's are filled in. It names the ask the
// attempt went through and who answered it, when it had one. Called with
// s.mu held.
func receiptOf(adm *admission, d *checkedDispatch, consent []byte) msg.Receipt {
	return msg.Receipt{
		Attempt: d.attempt, Controller: adm.ctrl.name, Application: d.application, Operation: d.operation,
		Kind: d.kind, RequestSHA256: d.sha[:], Consent: consent, ResolvedBy: adm.resolvedBy,
		Agent: d.agent, Conversation: d.conversation, Ask: adm.a.ask, AnsweredBy: adm.a.answeredBy,
	}
}

// commitOutcome settles an application's answer for an admission whose
// reservation is durable: it charges what the answer's status costs
// (settlement), releases the rest of the reservation, signs the receipt
// (chained to the last one) and journals it with the answer in one
// outcome.v2 record. On an error nothing is released: the reservation
// stands, as the journal says, and the caller marks the attempt uncertain.
func (s *Store) commitOutcome(adm *admission, d *checkedDispatch, consent []byte, status int, body []byte) ([]byte, error) {
	respSum := sha256.Sum256(body)
	charge, price := adm.settlement(status)
	release := adm.charge - charge
	s.mu.Lock()
	p := &adm.ctrl.purse
	p.charged -= release
	s.st.ledger++
	r := receiptOf(adm, d, consent)
	r.ResponseSHA256, r.Status, r.Charge, r.BalanceAfter = respSum[:], status, charge, p.balance()
	r.Outcome, r.PriceApplied = msg.StateDefinite, price
	signed, seq, head, err := s.signReceiptLocked(r)
	if err != nil {
		p.charged += release
		s.mu.Unlock()
		return nil, err
	}
	rec := hostlog.OutcomeV2{Attempt: d.attempt, Status: status, Body: body, Receipt: signed, Seq: seq, Charge: charge, Ledger: s.st.ledger}
	s.mu.Unlock()
	jseq, err := s.appendReceipt(hostlog.KindOutcomeV2, rec)
	if err != nil {
		s.mu.Lock()
		p.charged += release
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	adm.a.state, adm.a.outcomeSeq, adm.a.detail = msg.StateDefinite, jseq, ""
	s.st.agentSettle(adm.a, release)
	s.mu.Unlock()
	s.receiptDurable(seq, head)
	return signed, nil
}

// commitNotSent releases the reservation of an attempt whose delivery
// failed before its first byte was written, and journals the release with
// its receipt (not-sent, charge 0, Reason the delivery's detail, which
// names no host path). On an error the reservation stands: the attempt is
// uncertain, as the journal says.
func (s *Store) commitNotSent(adm *admission, d *checkedDispatch, consent []byte, detail string) ([]byte, error) {
	s.mu.Lock()
	p := &adm.ctrl.purse
	p.charged -= adm.charge
	s.st.unuse(adm)
	s.st.ledger++
	r := receiptOf(adm, d, consent)
	r.BalanceAfter, r.Outcome, r.Reason, r.PriceApplied = p.balance(), msg.StateNotSent, detail, msg.PriceNone
	signed, seq, head, err := s.signReceiptLocked(r)
	if err == nil {
		adm.a.state, adm.a.detail = msg.StateNotSent, detail
	}
	rec := hostlog.NotSentV2{Attempt: adm.a.id, Detail: detail, Receipt: signed, Seq: seq, Ledger: s.st.ledger}
	s.mu.Unlock()
	var jseq uint64
	if err == nil {
		jseq, err = s.appendReceipt(hostlog.KindNotSentV2, rec)
	}
	if err != nil {
		s.mu.Lock()
		p.charged += adm.charge
		adm.g.use(adm.day)
		s.st.agentHold(adm.ctrl.name, adm.a.agent, adm.a.conversation, adm.day, adm.charge)
		// The cause may name the journal's path: it goes to the log (the
		// caller logs it); inspect's detail reaches the agent.
		adm.a.state, adm.a.detail = msg.StateUncertain, "delivery failed before sending, but the host could not journal the release"
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	adm.a.outcomeSeq = jseq
	s.mu.Unlock()
	s.receiptDurable(seq, head)
	return signed, nil
}

// commitRefused ends an admission refused before anything was reserved:
// the payer refused or its consent could not be obtained (consent nil), or
// the last-moment check refused (consent the payer's, when it gave one).
// It gives back the admission's hold and daily count and journals a
// refused record with its receipt (charge 0, Reason). This is the one
// durable point of a refusal after admission. On an error the attempt is
// forgotten as before: nothing was reserved, so nothing is charged either
// way; whether the refusal's record is on disk is another matter (see
// Host.refuseAdmitted).
func (s *Store) commitRefused(adm *admission, d *checkedDispatch, consent []byte, reason string) ([]byte, error) {
	s.mu.Lock()
	p := &adm.ctrl.purse
	p.holds -= adm.charge
	s.st.unuse(adm)
	adm.a.charge = 0
	r := receiptOf(adm, d, consent)
	r.BalanceAfter, r.Outcome, r.Reason, r.PriceApplied = p.balance(), msg.StateRefused, reason, msg.PriceNone
	signed, seq, head, err := s.signReceiptLocked(r)
	rec := hostlog.Refused{Attempt: adm.a.id, Controller: adm.ctrl.name, Reason: reason, Receipt: signed, Seq: seq, Ledger: s.st.ledger,
		Agent: d.agent, Conversation: d.conversation}
	if err != nil {
		delete(s.st.attempts, adm.a.id)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	jseq, err := s.appendReceipt(hostlog.KindRefused, rec)
	s.mu.Lock()
	if err != nil {
		delete(s.st.attempts, adm.a.id)
		s.mu.Unlock()
		return nil, err
	}
	adm.a.state, adm.a.detail, adm.a.outcomeSeq = msg.StateRefused, reason, jseq
	s.mu.Unlock()
	s.receiptDurable(seq, head)
	return signed, nil
}

// maxPayerReason bounds the payer's own words a refusal's receipt quotes:
// the receipt's reason is one line, and the controller's refusal is the
// controller's text.
const maxPayerReason = 300

// quoteLine is s on one line (line breaks as spaces), cut to at most n bytes
// at a character boundary, "..." marking a cut.
func quoteLine(s string, n int) string {
	s = strings.ToValidUTF8(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s), "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
