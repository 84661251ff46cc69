package controller

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire/msg"
)

// payer is the controller's own word on what it pays (ctlconf.Payer): it
// consents to a charge only within the per-call ceiling and the day's
// budget of the call's principal, and keeps the consents it signed until
// the attempt's result, to check the receipt against them.
//
// The day's spending of a principal (DESIGN.md section 5, "The payer's
// budget") is what its ended attempts of the day counted (a receipt's
// charge, else what was consented), plus what it consented to for attempts
// still in flight, plus the per-call ceiling for each of its attempts of
// the day found at start without an end. Nothing of it needs an fsync of
// its own: the begin, journaled before any consent, is what a restart
// counts.
type payer struct {
	policy *ctlconf.Payer // nil: no charge is ever consented to
	log    *slog.Logger

	// mu guards the fields below; it is taken inside the ledger's lock
	// (ledger.Consent's approve) and never the other way round.
	mu      sync.Mutex
	day     int64             // the latest day recorded: never goes back
	behind  bool              // the clock was last seen behind day (logged once)
	spent   map[string]uint64 // by principal, on day
	holds   map[string]*hold  // by attempt: consents signed and not yet settled
	refused map[string]*msg.Refusal
}

// hold is one consent this process signed, until its attempt's result.
type hold struct {
	principal string
	day       int64
	amount    uint64 // the most the consent allows: max(answer, refusal price)
	consent   msg.Consent
	signed    []byte
}

// newPayer starts the payer from what the journal says of its latest day.
func newPayer(policy *ctlconf.Payer, log *slog.Logger, led *ledger.Ledger) *payer {
	day, spent, unsettled := led.Spending()
	p := &payer{policy: policy, log: log, day: day, spent: spent, holds: map[string]*hold{}, refused: map[string]*msg.Refusal{}}
	for principal, n := range unsettled {
		ceiling := uint64(0)
		if policy != nil {
			ceiling = policy.Limits(principal).MaxPerCall
		}
		p.spent[principal] += uint64(n) * ceiling
		log.Warn("attempts found at start without a result count at the payer's per-call ceiling",
			"principal", principal, "attempts", n, "ceiling", ceiling, "day", dayString(day))
	}
	return p
}

// utcDay is the UTC day of t, in days since the Unix epoch.
func utcDay(t time.Time) int64 {
	s := t.Unix()
	d := s / 86400
	if s < 0 && s%86400 != 0 {
		d--
	}
	return d
}

func dayString(d int64) string { return time.Unix(d*86400, 0).UTC().Format(time.DateOnly) }

// today is the day a call begun at now counts against: now's UTC day, but
// never earlier than the latest day recorded, so a clock set back refills
// nothing (and says so, once).
func (p *payer) today(now time.Time) int64 {
	d := utcDay(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case d > p.day:
		p.day, p.behind = d, false
		clear(p.spent)
	case d < p.day && !p.behind:
		p.behind = true
		p.log.Warn("the clock is behind the latest day recorded: calls keep counting against that day, nothing is refilled",
			"clock", now.UTC().Format(time.RFC3339), "day", dayString(p.day))
	}
	return p.day
}

func payerRefusal(format string, a ...any) *msg.Refusal {
	return &msg.Refusal{Code: msg.CodePayerLimit, Reason: fmt.Sprintf(format, a...)}
}

// take consents, within the policy, to attempt paying answer for an answer
// or refusal for a refusal: the larger counts against the principal's day
// until the result settles it. A refusal is remembered for the attempt, so
// the agent is told the payer's own reason rather than the host's account
// of it.
func (p *payer) take(b ledger.Begin, answer, refusal uint64) *msg.Refusal {
	amount := max(answer, refusal)
	p.mu.Lock()
	defer p.mu.Unlock()
	ref := p.check(b.Principal, amount)
	if ref != nil {
		p.refused[b.Attempt] = ref
		return ref
	}
	p.spent[b.Principal] += amount
	p.holds[b.Attempt] = &hold{principal: b.Principal, day: p.day, amount: amount}
	return nil
}

// check is take's policy; p.mu is held.
func (p *payer) check(principal string, amount uint64) *msg.Refusal {
	if p.policy == nil {
		return payerRefusal("%v", ctlconf.ErrNoPayerPolicy)
	}
	if principal == "" {
		return payerRefusal("the call names no principal, so no payer budget applies to it")
	}
	// The foreground principal never takes the defaults: its limits are
	// the allowance root granted, and there is none without one.
	ceiling, budget := "the payer's ceiling", "the payer's budget"
	if principal == ctlconf.PrincipalForeground {
		if p.policy.ForegroundAllowance == nil {
			return payerRefusal("%v", ctlconf.ErrNoForegroundAllowance)
		}
		ceiling, budget = "the foreground allowance's ceiling", "the foreground allowance"
	}
	lim := p.policy.Limits(principal)
	if amount > lim.MaxPerCall {
		return payerRefusal("the charge of %d credits exceeds %s of %d credits per call", amount, ceiling, lim.MaxPerCall)
	}
	spent := p.spent[principal]
	if spent+amount > lim.PerDay {
		left := uint64(0)
		if spent < lim.PerDay {
			left = lim.PerDay - spent
		}
		return payerRefusal("%s of %d credits a day has %d left today (UTC %s), this call asks for %d; it refills at 00:00 UTC",
			budget, lim.PerDay, left, dayString(p.day), amount)
	}
	return nil
}

// signed records the consent signed for a hold; release undoes a take
// whose consent could not be signed.
func (p *payer) signed(attempt string, c msg.Consent, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.holds[attempt]; h != nil {
		h.consent, h.signed = c, b
	}
}

func (p *payer) release(attempt string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.holds[attempt]; h != nil {
		delete(p.holds, attempt)
		if h.day == p.day {
			p.spent[h.principal] -= h.amount
		}
	}
}

// held returns the consent signed for attempt, if this process signed one.
func (p *payer) held(attempt string) (hold, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.holds[attempt]
	if h == nil || h.signed == nil {
		return hold{}, false
	}
	return *h, true
}

// refusalOf returns the payer's own refusal of attempt's reserve, if any.
func (p *payer) refusalOf(attempt string) *msg.Refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[attempt]
}

// settle ends attempt's hold with its journaled result: the day counts
// what res spent instead of what was consented.
func (p *payer) settle(attempt string, res *ledger.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.refused, attempt)
	h := p.holds[attempt]
	if h == nil {
		return
	}
	delete(p.holds, attempt)
	if h.day == p.day {
		p.spent[h.principal] = p.spent[h.principal] - h.amount + res.Spent()
	}
}

// forget drops attempt's hold and leaves what it consented counted: its
// result could not be journaled.
func (p *payer) forget(attempt string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.holds, attempt)
	delete(p.refused, attempt)
}

// consented is what attempt's hold allows, for its result record.
func (p *payer) consented(attempt string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.holds[attempt]; h != nil {
		return h.amount
	}
	return 0
}

// budget is what principal may still be charged today, for the overview.
func (p *payer) budget(principal string) (lim ctlconf.PayerLimits, left uint64, day int64, ok bool) {
	if p.policy == nil {
		return lim, 0, 0, false
	}
	lim = p.policy.Limits(principal)
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.spent[principal]; s < lim.PerDay {
		left = lim.PerDay - s
	}
	return lim, left, p.day, true
}
