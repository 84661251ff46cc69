package operator

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// admission is an admitted attempt on its way through the dispatch path.
type admission struct {
	a      *attempt
	ctrl   *controller
	g      *grant
	grant  msg.Grant // a copy, read without the lock
	charge uint64
	day    int64
}

// admit checks the grant and the purse for one dispatch and, when both
// allow it, holds the charge and one daily count and registers the attempt
// id (so a second dispatch with it is a duplicate). The refusal for an
// operation the grant does not cover says nothing of whether it exists.
func (s *Store) admit(ctrlName string, d *checkedDispatch, now time.Time) (*admission, *msg.Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if _, dup := st.attempts[d.attempt]; dup {
		return nil, &msg.Refusal{Code: msg.CodeDuplicate, Reason: fmt.Sprintf("attempt %s was already dispatched; it is never delivered twice", d.attempt)}
	}
	c, ok := st.controllers[ctrlName]
	if !ok {
		return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: "no controller " + ctrlName}
	}
	nowMs := now.UnixMilli()
	var chosen, revoked, expired *grant
	for _, id := range st.grantOrder {
		g := st.grants[id]
		if g.g.Controller != ctrlName || !g.g.Covers(d.application, d.operation) {
			continue
		}
		switch {
		case g.revoked:
			revoked = g
		case !g.g.Live(nowMs):
			expired = g
		default:
			chosen = g
		}
		if chosen != nil {
			break
		}
	}
	if chosen == nil {
		switch {
		case expired != nil:
			return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: fmt.Sprintf("grant %s is not in force (valid %s to %s)", expired.g.ID,
				time.UnixMilli(expired.g.NotBefore).UTC().Format(time.RFC3339), time.UnixMilli(expired.g.NotAfter).UTC().Format(time.RFC3339))}
		case revoked != nil:
			return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: fmt.Sprintf("grant %s is revoked", revoked.g.ID)}
		case d.operation == "":
			return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: fmt.Sprintf("no grant of controller %s covers application %s", ctrlName, d.application)}
		default:
			return nil, &msg.Refusal{Code: msg.CodeNoGrant, Reason: fmt.Sprintf("no grant of controller %s covers operation %s of application %s", ctrlName, d.operation, d.application)}
		}
	}
	p := &c.purse
	if p.frozen {
		return nil, &msg.Refusal{Code: msg.CodeFrozen, Reason: fmt.Sprintf("the purse of controller %s is frozen", ctrlName)}
	}
	charge := chosen.g.DiscoveryPrice
	if d.kind == msg.KindInvoke {
		charge = chosen.g.Price
	}
	if p.available() < charge {
		return nil, &msg.Refusal{Code: msg.CodeInsufficient, Reason: fmt.Sprintf("the purse of controller %s has %d credits available, the charge is %d", ctrlName, p.available(), charge)}
	}
	day := utcDay(now)
	if used := chosen.usedOn(day); used >= chosen.g.PerDay {
		return nil, &msg.Refusal{Code: msg.CodeDailyLimit, Reason: fmt.Sprintf("grant %s admitted its %d requests for today (UTC)", chosen.g.ID, chosen.g.PerDay)}
	}
	p.holds += charge
	chosen.use(day)
	a := &attempt{id: d.attempt, controller: ctrlName, grant: chosen.g.ID, charge: charge, day: day, state: stateAdmitting}
	st.attempts[d.attempt] = a
	return &admission{a: a, ctrl: c, g: chosen, grant: chosen.g, charge: charge, day: day}, nil
}

// drop undoes an admission that never reached the journal.
func (s *Store) drop(adm *admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	adm.ctrl.purse.holds -= adm.charge
	s.st.unuse(adm)
	delete(s.st.attempts, adm.a.id)
}

func (st *state) unuse(adm *admission) {
	if adm.g.day == adm.day && adm.g.count > 0 {
		adm.g.count--
	}
}

// commitReserve journals the reservation and mark-send of an admitted
// attempt. When it returns nil, delivery may begin.
func (s *Store) commitReserve(adm *admission, d *checkedDispatch, consent []byte) error {
	s.mu.Lock()
	p := &adm.ctrl.purse
	p.holds -= adm.charge
	p.charged += adm.charge
	s.st.ledger++
	rec := recReserve{
		Attempt: d.attempt, Controller: adm.ctrl.name, Grant: adm.grant.ID, Application: d.application,
		Operation: d.operation, Kind: d.kind, RequestSHA256: d.sha[:], Charge: adm.charge,
		Consent: consent, Day: adm.day, Ledger: s.st.ledger,
	}
	adm.a.state = msg.StateDeliveryRequested
	s.mu.Unlock()
	if _, err := s.append(kindReserve, rec); err != nil {
		s.mu.Lock()
		p.charged -= adm.charge
		s.st.unuse(adm)
		delete(s.st.attempts, adm.a.id)
		s.mu.Unlock()
		return err
	}
	return nil
}

// commitNotSent releases the reservation of an attempt whose delivery
// failed before its first byte was written.
func (s *Store) commitNotSent(adm *admission, detail string) error {
	s.mu.Lock()
	adm.ctrl.purse.charged -= adm.charge
	s.st.unuse(adm)
	s.st.ledger++
	rec := recNotSent{Attempt: adm.a.id, Detail: detail, Ledger: s.st.ledger}
	adm.a.state, adm.a.detail = msg.StateNotSent, detail
	s.mu.Unlock()
	if _, err := s.append(kindNotSent, rec); err != nil {
		s.mu.Lock()
		adm.ctrl.purse.charged += adm.charge
		adm.g.use(adm.day)
		adm.a.state, adm.a.detail = msg.StateUncertain, "the release could not be journaled: "+err.Error()
		s.mu.Unlock()
		return err
	}
	return nil
}

// commitUncertain marks an attempt uncertain: sending began and no answer
// was recorded. It keeps its reservation. The record only adds the detail;
// a reserve without an outcome is uncertain after a restart anyway.
func (s *Store) commitUncertain(adm *admission, detail string, log *slog.Logger) {
	s.mu.Lock()
	adm.a.state, adm.a.detail = msg.StateUncertain, detail
	s.mu.Unlock()
	if _, err := s.append(kindUncertain, recUncertain{Attempt: adm.a.id, Detail: detail}); err != nil {
		log.Error("steward-operator: uncertain record", "attempt", adm.a.id, "err", err)
	}
}

// commitOutcome signs the receipt (chained to the last one) and journals it
// with the application's answer in one record.
func (s *Store) commitOutcome(adm *admission, d *checkedDispatch, consent []byte, status int, body []byte) ([]byte, error) {
	respSum := sha256.Sum256(body)
	s.mu.Lock()
	st := s.st
	r := msg.Receipt{
		Seq: st.signedSeq + 1, Prev: st.signedHead, Attempt: d.attempt, Controller: adm.ctrl.name,
		Application: d.application, Operation: d.operation, Kind: d.kind, RequestSHA256: d.sha[:],
		ResponseSHA256: respSum[:], Status: status, Charge: adm.charge, BalanceAfter: adm.ctrl.purse.balance(),
		Consent: consent, At: s.now().UnixMilli(),
	}
	signed, err := msg.SignReceipt(s.key.Ed25519(), r)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	head := msg.ReceiptHash(signed)
	st.signedSeq, st.signedHead = r.Seq, head
	rec := recOutcome{Attempt: d.attempt, Status: status, Body: body, Receipt: signed, Seq: r.Seq, Ledger: st.ledger}
	s.mu.Unlock()
	jseq, err := s.append(kindOutcome, rec)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	st.markDurable(r.Seq, head)
	adm.a.state, adm.a.outcomeSeq, adm.a.detail = msg.StateDefinite, jseq, ""
	wake := s.wake
	s.mu.Unlock()
	if wake != nil {
		wake()
	}
	return signed, nil
}

var errStop = errors.New("stop")

// Inspect answers what the host recorded of one attempt of controller ctrl.
// An attempt of another controller is not-seen: a route's channel learns
// nothing of other controllers' attempts.
func (s *Store) Inspect(ctrl, id string) (msg.InspectResult, error) {
	s.mu.Lock()
	a, ok := s.st.attempts[id]
	if !ok || a.controller != ctrl || a.state == stateAdmitting {
		s.mu.Unlock()
		return msg.InspectResult{Attempt: id, State: msg.StateNotSeen}, nil
	}
	res := msg.InspectResult{Attempt: id, State: a.state, Detail: a.detail}
	seq := a.outcomeSeq
	s.mu.Unlock()
	if res.State != msg.StateDefinite {
		return res, nil
	}
	var out recOutcome
	err := s.j.Iterate(seq, func(r journal.Record) error {
		if r.Kind != kindOutcome {
			return fmt.Errorf("journal record %d is %s, not the outcome of attempt %s", r.Seq, r.Kind, id)
		}
		if err := decode(r, &out); err != nil {
			return err
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return msg.InspectResult{}, err
	}
	res.Status, res.Body, res.Receipt = out.Status, out.Body, out.Receipt
	return res, nil
}
