package operator

import (
	"crypto/sha256"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// The records that end an admitted attempt, each with its signed receipt
// (DESIGN.md section 5): an answer (commitOutcome), a delivery that failed
// before its first byte (commitNotSent) and a refusal before anything was
// reserved (commitRefused). Each is one receiptEnd of commitEnd
// (receipt.go), so that receipts are chained in signing order and
// checkpoints cover only durable ones. An attempt that stays uncertain has no receipt until the operator
// resolves it.

// isAnswer reports whether status is the application's success (2xx):
// the only status charged the answer price.
func isAnswer(status int) bool { return msg.IsAnswer(status) }

// refusalPrice is what an answer other than 2xx costs under adm: the
// grant's refusal price, never above the reservation (a discovery
// reserves its discovery price, which may be below the refusal price).
// The reserve asks the payer's consent to this price (Store.consent).
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
func receiptOf(adm *admission, d *hostlog.CheckedDispatch, consent []byte) msg.Receipt {
	return msg.Receipt{
		Attempt: d.Attempt, Controller: adm.ctrl.Name, Application: d.Application, Operation: d.Operation,
		Kind: d.Kind, RequestSHA256: d.SHA[:], Consent: consent, ResolvedBy: adm.resolvedBy,
		Agent: d.Agent, Conversation: d.Conversation, Ask: adm.a.Ask, AnsweredBy: adm.a.AnsweredBy,
	}
}

// commitOutcome settles an application's answer for an admission whose
// reservation is durable: it charges what the answer's status costs
// (settlement), releases the rest of the reservation, signs the receipt
// (chained to the last one) and journals it with the answer in one
// outcome.v2 record. On an error nothing is released: the reservation
// stands, as the journal says, and the caller marks the attempt uncertain.
func (s *Store) commitOutcome(adm *admission, d *hostlog.CheckedDispatch, consent []byte, status int, body []byte) ([]byte, error) {
	respSum := sha256.Sum256(body)
	charge, price := adm.settlement(status)
	release := adm.charge - charge
	p := &adm.ctrl.Purse
	return s.commitEnd(receiptEnd{
		kind: hostlog.KindOutcomeV2,
		receipt: func() msg.Receipt {
			p.Charged -= release
			s.st.Ledger++
			r := receiptOf(adm, d, consent)
			r.ResponseSHA256, r.Status, r.Charge, r.BalanceAfter = respSum[:], status, charge, p.balance()
			r.Outcome, r.PriceApplied = msg.StateDefinite, price
			return r
		},
		record: func(signed []byte, seq uint64) any {
			return hostlog.OutcomeV2{Attempt: d.Attempt, Status: status, Body: body, Receipt: signed, Seq: seq, Charge: charge, Ledger: s.st.Ledger}
		},
		undo: func() { p.Charged += release },
		apply: func(at journal.Place) {
			adm.a.State, adm.a.EndAt, adm.a.Detail = msg.StateDefinite, at, ""
			s.st.agentSettle(adm.a, release)
		},
	})
}

// commitNotSent releases the reservation of an attempt whose delivery
// failed before its first byte was written, and journals the release with
// its receipt (not-sent, charge 0, Reason the delivery's detail, which
// names no host path). On an error the reservation stands: the attempt is
// uncertain, as the journal says.
func (s *Store) commitNotSent(adm *admission, d *hostlog.CheckedDispatch, consent []byte, detail string) ([]byte, error) {
	p := &adm.ctrl.Purse
	return s.commitEnd(receiptEnd{
		kind: hostlog.KindNotSentV2,
		receipt: func() msg.Receipt {
			p.Charged -= adm.charge
			s.st.unuse(adm)
			s.st.Ledger++
			r := receiptOf(adm, d, consent)
			r.BalanceAfter, r.Outcome, r.Reason, r.PriceApplied = p.balance(), msg.StateNotSent, detail, msg.PriceNone
			return r
		},
		record: func(signed []byte, seq uint64) any {
			// Not sent from the signing on: its release is on its way.
			adm.a.State, adm.a.Detail = msg.StateNotSent, detail
			return hostlog.NotSentV2{Attempt: adm.a.ID, Detail: detail, Receipt: signed, Seq: seq, Ledger: s.st.Ledger}
		},
		undo: func() {
			p.Charged += adm.charge
			adm.g.use(adm.day)
			s.st.agentHold(adm.a.ID, adm.ctrl.Name, adm.a.Agent, adm.a.Conversation, adm.day, adm.charge)
			// The cause may name the journal's path: it goes to the log (the
			// caller logs it); inspect's detail reaches the agent.
			adm.a.State, adm.a.Detail = msg.StateUncertain, "delivery failed before sending, but the host could not journal the release"
		},
		apply: func(at journal.Place) { adm.a.EndAt = at },
	})
}

// commitRefused ends an admission refused before anything was reserved:
// the payer refused or its consent could not be obtained (consent nil), or
// the last-moment check refused (consent the payer's, when it gave one).
// It gives back the admission's hold and daily count and journals a
// refused record with its receipt (charge 0, Reason). This is the one
// durable point of a refusal after admission. On an error the attempt is
// forgotten as before: nothing was reserved, so nothing is charged either
// way; whether the refusal's record is on disk is another matter (see
// Store.refuseAdmitted).
func (s *Store) commitRefused(adm *admission, d *hostlog.CheckedDispatch, consent []byte, reason string) ([]byte, error) {
	p := &adm.ctrl.Purse
	return s.commitEnd(receiptEnd{
		kind: hostlog.KindRefused,
		receipt: func() msg.Receipt {
			p.Holds -= adm.charge
			s.st.unuse(adm)
			adm.a.Charge = 0
			r := receiptOf(adm, d, consent)
			r.BalanceAfter, r.Outcome, r.Reason, r.PriceApplied = p.balance(), msg.StateRefused, reason, msg.PriceNone
			return r
		},
		record: func(signed []byte, seq uint64) any {
			return hostlog.Refused{Attempt: adm.a.ID, Controller: adm.ctrl.Name, Reason: reason, Receipt: signed, Seq: seq, Ledger: s.st.Ledger,
				Agent: d.Agent, Conversation: d.Conversation}
		},
		undo: func() { delete(s.st.Attempts, adm.a.ID) },
		apply: func(at journal.Place) {
			adm.a.State, adm.a.Detail, adm.a.EndAt = msg.StateRefused, reason, at
			if adm.a.First == 0 {
				adm.a.First = at.Seq
			}
		},
	})
}

// maxPayerReason bounds the payer's own words a refusal's receipt quotes:
// the receipt's reason is one line, and the controller's refusal is the
// controller's text.
const maxPayerReason = 300
