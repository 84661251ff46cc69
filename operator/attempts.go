package operator

import (
	"encoding/hex"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// Failpoints of an operator's resolution (see doc.go for the state each
// leaves).
const (
	FailAfterRedeliverRecord = "host-after-redeliver-record"
	FailAfterResolve         = "host-after-resolve"
)

// Attempts lists the attempts the host has reserved, in journal order;
// with state, only those in it; at most the latest MaxListedAttempts (of
// those the history index holds, the latest MaxListedAttempts looked at),
// and how many earlier ones were left off.
func (s *Store) Attempts(state msg.State) ([]views.AttemptView, int, error) {
	if state != "" {
		if err := views.KnownHostState(state); err != nil {
			return nil, 0, err
		}
	}
	keep := func(a *attempt) bool { return a.State != stateAdmitting && (state == "" || a.State == state) }
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*attempt
	for _, a := range s.st.Attempts {
		if keep(a) {
			all = append(all, a)
		}
	}
	total := len(all)
	for st, n := range s.st.Forgotten {
		if state == "" || st == state {
			total += int(n)
		}
	}
	past, err := s.st.pastAttempts(views.MaxListedAttempts)
	if err != nil {
		return nil, 0, err
	}
	for _, a := range past {
		if keep(a) && s.st.Attempts[a.ID] == nil {
			all = append(all, a)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].First < all[j].First })
	all = all[max(0, len(all)-views.MaxListedAttempts):]
	out := make([]views.AttemptView, 0, len(all))
	for _, a := range all {
		out = append(out, views.AttemptView{Attempt: a.ID, Controller: a.Controller, State: a.State, Reserved: a.Charge, Detail: a.inspectDetail(), Agent: a.Agent})
	}
	return out, max(0, total-len(out)), nil
}

// AttemptInspect shows one attempt: what Inspect answers its controller,
// with the reservation's application, operation and kind, and the receipt.
func (s *Store) AttemptInspect(id string) (views.AttemptView, error) {
	s.mu.Lock()
	a, err := s.st.attemptOf(id)
	if a == nil || a.State == stateAdmitting {
		s.mu.Unlock()
		return views.AttemptView{}, lookupOr(err, views.Refusedf("attempt %s: the host has no reservation for it", hostlog.Trunc(id, hostlog.MaxAttemptID)))
	}
	v := views.AttemptView{Attempt: a.ID, Controller: a.Controller, Reserved: a.Charge, Agent: a.Agent}
	reserved := a.ReserveAt
	s.mu.Unlock()
	ir, err := s.Inspect(v.Controller, id)
	if err != nil {
		return views.AttemptView{}, err
	}
	v.State, v.Detail, v.Status = ir.State, ir.Detail, ir.Status
	// An attempt refused after admission reserved nothing: it has no
	// reserve record, and its receipt says what it was for.
	if reserved.Seq != 0 {
		rr, err := s.readReserve(id, reserved)
		if err != nil {
			return views.AttemptView{}, err
		}
		v.Application, v.Operation, v.Kind, v.Redeliverable = rr.Application, rr.Operation, rr.Kind, rr.HasRequest()
	}
	if utf8.Valid(ir.Body) {
		v.BodyText = string(ir.Body)
	}
	if ir.Receipt != nil {
		v.ReceiptID = hex.EncodeToString(msg.ReceiptHash(ir.Receipt))
		rc, err := msg.VerifyReceipt(ir.Receipt, s.hostRing)
		if err != nil {
			return views.AttemptView{}, fmt.Errorf("attempt %s: its receipt: %w", id, err)
		}
		charged := rc.Charge
		v.Outcome, v.Charged, v.Reason, v.ResolvedBy = rc.Outcome, &charged, rc.Reason, rc.ResolvedBy
		if reserved.Seq == 0 {
			v.Application, v.Operation, v.Kind = rc.Application, rc.Operation, rc.Kind
		}
		if rc.Outcome == "" {
			v.Outcome = msg.StateDefinite // a version 1 receipt
		}
	}
	return v, nil
}

// inspectDetail is the detail line inspect answers: after a redelivery,
// who redelivered it and why.
func (a *attempt) inspectDetail() string {
	switch {
	case a.Resolution == "":
		return a.Detail
	case a.State == msg.StateDefinite:
		return a.Resolution
	default:
		return a.Detail + " (" + a.Resolution + ")"
	}
}

// redeliveredLine and resolvedLine are the detail lines of a resolution.
func redeliveredLine(by, reason string) string { return "redelivered by " + by + ": " + reason }

func resolvedLine(state msg.State, by, reason string) string {
	if state == msg.StateReleased {
		return "released by the operator (" + by + "): " + reason + "; nothing was charged"
	}
	return "performed by the operator's word (" + by + "): " + reason + "; charged, and its answer was never recorded"
}

// beginResolve checks that attempt req.Attempt can be resolved and marks
// its resolution under way; endResolve clears the mark. Only an uncertain
// attempt can be resolved (an attempt found delivery-requested at start
// is uncertain after replay); anything else is refused with its state.
func (s *Store) beginResolve(req views.ResolveRequest) (*attempt, error) {
	if err := views.CheckResolveRequest(req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.st.attemptOf(req.Attempt) // an ended one is refused by its state
	switch {
	case err != nil:
		return nil, err
	case a == nil || a.State == stateAdmitting:
		return nil, views.Refusedf("attempt %s: the host has no reservation for it; there is nothing to resolve", req.Attempt)
	case a.resolving:
		return nil, views.Refusedf("attempt %s: another resolution of it is under way", req.Attempt)
	case a.State == msg.StateDeliveryRequested:
		return nil, views.Refusedf("attempt %s is being delivered now; only an uncertain attempt can be resolved", req.Attempt)
	case a.State != msg.StateUncertain:
		return nil, views.Refusedf("attempt %s is %s, not uncertain; only an uncertain attempt can be resolved", req.Attempt, a.State)
	}
	a.resolving = true
	return a, nil
}

func (s *Store) endResolve(a *attempt) {
	s.mu.Lock()
	a.resolving = false
	s.mu.Unlock()
}

// SettleAttempt resolves an uncertain attempt by the operator's word, with
// a signed receipt in the one record that ends it: --release (not
// performed: the reservation and its daily count are released, charge 0)
// or --charge (performed, no answer recorded: the reservation is settled).
// A redelivery needs the running host (Store.Redeliver, which the host
// runs).
func (s *Store) SettleAttempt(req views.ResolveRequest) (views.AttemptView, error) {
	if req.Action == views.ResolveRedeliver {
		return views.AttemptView{}, views.Refusedf("attempt %s: --redeliver is done by the running host, which delivers to the application: start steward-operator serve and run the command again", hostlog.Trunc(req.Attempt, hostlog.MaxAttemptID))
	}
	a, err := s.beginResolve(req)
	if err != nil {
		return views.AttemptView{}, err
	}
	defer s.endResolve(a)
	s.mu.Lock()
	reserved := a.ReserveAt
	s.mu.Unlock()
	rr, err := s.readReserve(a.ID, reserved)
	if err != nil {
		return views.AttemptView{}, err
	}
	if err := s.commitResolve(a, rr, req); err != nil {
		return views.AttemptView{}, err
	}
	failpoint.Hit(FailAfterResolve)
	return s.AttemptInspect(a.ID)
}

// commitResolve signs the resolution's receipt and journals it with the
// resolution in one record (commitEnd); a release is a balance change,
// applied in memory before its append and undone if the append fails.
func (s *Store) commitResolve(a *attempt, rr *hostlog.ReserveV2, req views.ResolveRequest) error {
	state, charge := msg.StatePerformed, a.Charge
	reason := "no response was recorded; the operator states it was performed: " + req.Reason
	if req.Action == views.ResolveRelease {
		state, charge, reason = msg.StateReleased, 0, req.Reason
	}
	var c *controller
	var g *grant
	var counted bool
	_, err := s.commitEnd(receiptEnd{
		kind: hostlog.KindResolve,
		receipt: func() msg.Receipt {
			st := s.st
			c, g = st.Controllers[a.Controller], st.Grants[a.Grant]
			counted = g != nil && g.Day == a.Day && g.Count > 0
			if state == msg.StateReleased {
				st.release(a)
				st.Ledger++
			}
			return msg.Receipt{
				Attempt: a.ID, Controller: a.Controller, Application: rr.Application, Operation: rr.Operation, Kind: rr.Kind,
				RequestSHA256: rr.RequestSHA256, Charge: charge, BalanceAfter: c.Purse.balance(), Consent: rr.Consent,
				Outcome: state, Reason: reason, PriceApplied: priceApplied(charge, msg.PriceAnswer), ResolvedBy: req.By,
				Agent: rr.Agent, Conversation: rr.Conversation, Ask: a.Ask, AnsweredBy: a.AnsweredBy,
			}
		},
		record: func(signed []byte, seq uint64) any {
			return hostlog.Resolve{Attempt: a.ID, State: state, By: req.By, Reason: req.Reason, Receipt: signed, Seq: seq, Ledger: s.st.Ledger}
		},
		undo: func() {
			if state == msg.StateReleased {
				c.Purse.Charged += a.Charge
				if counted {
					g.Count++
				}
				s.st.agentHold(a.ID, a.Controller, a.Agent, a.Conversation, a.Day, a.Charge)
			}
		},
		apply: func(at journal.Place) {
			a.State, a.EndAt, a.Detail = state, at, resolvedLine(state, req.By, req.Reason)
		},
		appendFailed: func(err error) error {
			return fmt.Errorf("attempt %s: journaling the resolution: %w; it stays uncertain", a.ID, err)
		},
	})
	return err
}
