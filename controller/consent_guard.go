package controller

import (
	"fmt"
	"sync"

	"github.com/stewardrt/steward/wire/msg"
)

// flights are the exchanges this process has in flight on a forward
// channel, by attempt: a dispatch, or a collect of an attempt that awaited
// approval. The host asks the payer's consent (a reserve on the reverse
// channel) only while it answers one of them, so a reserve for an attempt
// with none in flight is not one this controller is waiting on: a host
// that asks then (DESIGN.md section 5, "The payer's consent") is refused,
// and nothing is journaled, held or charged. The zero value is ready.
type flights struct {
	mu sync.Mutex
	by map[string]string // attempt -> the frame type in flight (msg.TypeDispatch or msg.TypeCollect)
}

// start records that frame t of attempt id is about to leave; the
// returned func, called once the exchange is over (answered or not),
// removes it. A process sends one exchange of an attempt at a time (the
// dispatch once; a collect under the attempt's park hold), so one entry
// an attempt is enough.
func (f *flights) start(id, t string) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]string{}
	}
	f.by[id] = t
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.by[id] == t {
			delete(f.by, id)
		}
	}
}

// of is the frame type in flight for attempt id, "" when none is.
func (f *flights) of(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.by[id]
}

// inFlightRefusal refuses a reserve of attempt id unless this process has
// a dispatch or a collect of it in flight, and, for an attempt that
// awaited approval (ask non-empty: it has an awaiting record), unless the
// exchange in flight is a collect: its dispatch was answered awaiting
// approval, and only the collect of an approved ask reserves. Nil when
// the reserve may go on to the ledger's checks.
func (c *Controller) inFlightRefusal(id string) *msg.Refusal {
	t := c.flight.of(id)
	if _, _, open := c.led.Open(id); !open {
		return nil // the ledger refuses it: no journaled begin
	}
	switch ask := c.led.AskOf(id); {
	case ask != "" && t != msg.TypeCollect:
		return &msg.Refusal{Code: msg.CodeNoConsent, Reason: fmt.Sprintf("attempt %s awaits approval (ask %s) and this controller has no collect of it in flight: nothing was consented", id, ask)}
	case t == "":
		return &msg.Refusal{Code: msg.CodeNoConsent, Reason: fmt.Sprintf("this controller has no dispatch or collect of attempt %s in flight: nothing was consented", id)}
	}
	return nil
}

// unreceipted reports an inspect answer that would end an attempt with no
// receipt of the host's although the host saw it: refused or not sent
// without one (a host before version 2 receipts). Not-seen is not one:
// the host answers pending for every attempt it holds a reservation or a
// consent for (Store.Inspect), so an honest host's not-seen, after a
// restart too, says no consent of the attempt is held anywhere, and the
// operator's abandon of it stands (DESIGN.md section 5, "One consent a
// requestId").
func unreceipted(ir msg.InspectResult) bool {
	switch ir.State {
	case msg.StateRefused, msg.StateNotSent:
		return ir.Receipt == nil
	}
	return false
}

// consentedUnreceipted refuses to end attempt id, which this controller knows
// it consented to (ledger.ConsentKnown), on the host's word that it ended
// with no receipt to say so: a host holding that consent could still use
// it, and an attempt ended so frees its requestId for a new attempt and a
// second consent (two consents, one call). The attempt stays uncertain,
// and is logged as an error: an honest host signs a receipt for every end
// after a consent.
func (c *Controller) consentedUnreceipted(id string, state msg.State) error {
	c.log.Error("INSPECT REFUSED: the host reports no receipted end of an attempt this controller consented to", "attempt", id, "hostState", state)
	return fmt.Errorf("%w: attempt %s: the host says it is %s, with no receipt, but this controller consented to its reserve; it stays uncertain until the host's operator resolves it (steward-operator attempts resolve %s --redeliver|--release|--charge --reason TEXT)", ErrNotResolvable, id, state, id)
}
