package hostlog

import (
	"fmt"

	"github.com/stewardrt/steward/wire/msg"
)

// AskWindow gives an ask approved before collect windows (its ask-answer
// record carries no collectBy) its collect window, counted from when the
// upgraded host first read it: the record makes that instant durable, so
// a replay and a snapshot give the same window.
type AskWindow struct {
	Ask       string `cbor:"ask"`
	CollectBy int64  `cbor:"collectBy"`
}

// AskLapsed ends an approval nobody collected within its window: the ask
// goes to its on-timeout verdict (deny) at its collectBy.
type AskLapsed struct {
	Ask     string      `cbor:"ask"`
	Verdict msg.Verdict `cbor:"verdict"`
	At      int64       `cbor:"at"`
}

// CollectBy is the end of the collect window an answer of verdict v at at
// (unix ms) opens for an ask raised at raisedAt expiring at expiresAt
// with on-timeout verdict onTimeout: the ask's expiry duration from the
// answer, and 0 (no window) for a denial or an ask that expires to
// approve (DESIGN.md section 5, "Collect window").
func CollectBy(raisedAt, expiresAt, at int64, v, onTimeout msg.Verdict) int64 {
	if v != msg.VerdictApprove || onTimeout != msg.VerdictDeny {
		return 0
	}
	return at + expiresAt - raisedAt
}

// CheckAnswerWindow checks an ask-answer's collectBy against its ask's
// on-timeout verdict: only an approval of an ask that expires to deny
// has one (absent in answers written before windows), after the answer.
func CheckAnswerWindow(b *AskAnswer, onTimeout msg.Verdict) error {
	if b.CollectBy != 0 && (b.Verdict != msg.VerdictApprove || onTimeout != msg.VerdictDeny || b.CollectBy <= b.At) {
		return fmt.Errorf("ask %s: a %s answer at %d with a collect window to %d (on timeout %s)", b.Ask, b.Verdict, b.At, b.CollectBy, onTimeout)
	}
	return nil
}

// CheckAskWindow checks an ask-window record against its ask as it
// stands (state, on-timeout verdict, window so far, approval time): only
// an approval without a window of an ask that expires to deny gets one,
// ending after the approval.
func CheckAskWindow(b *AskWindow, state msg.AskState, onTimeout msg.Verdict, collectBy, answeredAt int64) error {
	switch {
	case state != msg.AskApproved || onTimeout != msg.VerdictDeny:
		return fmt.Errorf("ask %s: a collect window for an ask %s (on timeout %s)", b.Ask, state, onTimeout)
	case collectBy != 0:
		return fmt.Errorf("ask %s: a second collect window", b.Ask)
	case b.CollectBy <= answeredAt:
		return fmt.Errorf("ask %s: a collect window ending at %d, not after its approval at %d", b.Ask, b.CollectBy, answeredAt)
	}
	return nil
}

// CheckAskLapse checks an ask-lapsed record against its ask: an approval
// with a window, lapsing at its end to its on-timeout verdict, while its
// attempt still awaits approval (awaiting).
func CheckAskLapse(b *AskLapsed, state msg.AskState, onTimeout msg.Verdict, collectBy int64, awaiting bool) error {
	switch {
	case state != msg.AskApproved || collectBy == 0:
		return fmt.Errorf("ask %s: a lapse of an ask %s with no collect window", b.Ask, state)
	case b.At != collectBy || b.Verdict != onTimeout:
		return fmt.Errorf("ask %s: a lapse at %d to %s, not at its window's end %d to its on-timeout verdict %s", b.Ask, b.At, b.Verdict, collectBy, onTimeout)
	case !awaiting:
		return fmt.Errorf("ask %s: a lapse after its attempt went on", b.Ask)
	}
	return nil
}
