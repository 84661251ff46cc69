package views

import (
	"fmt"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// The bounds of a host's asks that no caller can choose its way past
// (DESIGN.md section 5, "Approvals", and section 8). An agent names its
// conversations and its request ids, so a bound counted by either is one
// it steps around by naming new ones; these count by what it cannot
// choose: its controller, its own name and the UTC day. The store
// (operator/ask_bounds.go) counts; this file holds the bounds, the
// refusals that name them, and the pages that keep every list's reply far
// inside its frame.

// Defaults of AskBounds: what a host whose operator set nothing bounds
// its pending asks by.
const (
	DefaultPendingAsksPerAgent          = 16
	DefaultPendingAsksPerController     = 256
	DefaultPendingAskBytesPerController = 4 << 20
)

// AskBounds are the operator's caps on the asks pending at once
// (`steward-operator serve --pending-asks-per-agent`,
// `--pending-asks-per-controller`, `--pending-ask-bytes`): each pending
// ask keeps its call's request (up to 64 KiB) in the host's memory until
// it is decided. A zero field is its default.
type AskBounds struct {
	PerAgent, PerController int
	// BytesPerController bounds the requests of one controller's pending
	// asks together.
	BytesPerController int64
}

// WithDefaults is b with each zero field its default.
func (b AskBounds) WithDefaults() AskBounds {
	if b.PerAgent <= 0 {
		b.PerAgent = DefaultPendingAsksPerAgent
	}
	if b.PerController <= 0 {
		b.PerController = DefaultPendingAsksPerController
	}
	if b.BytesPerController <= 0 {
		b.BytesPerController = DefaultPendingAskBytesPerController
	}
	return b
}

// PendingAsk is a pending ask as the caps count it.
type PendingAsk struct {
	Controller, Agent string
	Bytes             int64
}

// Refusal is why a new ask of agent of controller ctrl, of a request of
// bytes, may not be raised beside the pending ones: the one line naming
// the cap it would pass, or "".
func (b AskBounds) Refusal(pending []PendingAsk, ctrl, agent string, bytes int64) string {
	var ofAgent, ofCtrl int
	var held int64
	for _, p := range pending {
		if p.Controller == ctrl {
			ofCtrl, held = ofCtrl+1, held+p.Bytes
			if p.Agent == agent {
				ofAgent++
			}
		}
	}
	var why string
	switch {
	case ofAgent >= b.PerAgent:
		why = fmt.Sprintf("%d asks of agent %s are pending, the bound of pending asks per agent", ofAgent, agent)
	case ofCtrl >= b.PerController:
		why = fmt.Sprintf("%d asks of this controller's agents are pending, the bound of pending asks per controller", ofCtrl)
	case held+bytes > b.BytesPerController:
		why = fmt.Sprintf("the pending asks of this controller's agents hold %d bytes of calls and this call's %d would pass the bound of %d bytes of pending asks per controller",
			held, bytes, b.BytesPerController)
	default:
		return ""
	}
	return why + ": a call needing approval is refused until one is answered or expires; nothing was journaled, reserved or sent"
}

// AnswersSpent is the line an advisor is told when agent's answers of
// the day (n of bound) are spent; refill is when the day ends.
func AnswersSpent(n, bound uint64, agent, refill string) string {
	return fmt.Sprintf("agent answers spent: %d of %d for agent %s today, the bound of agent answers per day; this ask waits for a human (the day refills at %s)",
		n, bound, agent, refill)
}

// FitPage is how many of the first n items fit one page: at most
// msg.MaxAsksListed, their encoded sizes (size(i), asked in order)
// together at most msg.AsksPageBytes, and always the first (an ask alone
// fits: its request and every other field of it are bounded).
func FitPage(n int, size func(i int) int) int {
	total := 0
	for i := range min(n, msg.MaxAsksListed) {
		if total += size(i); i > 0 && total > msg.AsksPageBytes {
			return i
		}
	}
	return min(n, msg.MaxAsksListed)
}

// EncodedSize is v's size as a reply encodes it.
func EncodedSize(v any) int {
	b, err := wire.Marshal(v)
	if err != nil {
		return msg.AsksPageBytes // never: the views are plain data
	}
	return len(b)
}
