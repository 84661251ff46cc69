package audit

import (
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// Collect windows in the audit: an ask-window record names an ask
// approved and not yet collected (it changes no verdict); an ask-lapsed
// record turns an approval into a deny, so that a reservation of its
// attempt after the lapse is a finding as for any denied ask.

// AskWindow checks that the window is of an approved ask still live.
func (a *journalAudit) AskWindow(r journal.Record, b *hostlog.AskWindow) error {
	k := a.asks.byID[b.Ask]
	if k == nil || !k.decided || k.verdict != msg.VerdictApprove {
		return faultf("%s: a collect window for ask %s, which is not an approval awaiting its collect", recordWhere(r), b.Ask)
	}
	return nil
}

// AskLapsed turns an approval not collected in its window into a deny.
func (a *journalAudit) AskLapsed(r journal.Record, b *hostlog.AskLapsed) error {
	k := a.asks.byID[b.Ask]
	if k == nil || !k.decided || k.verdict != msg.VerdictApprove || k.ended {
		return faultf("%s: a lapse of ask %s, which is not an approval awaiting its collect", recordWhere(r), b.Ask)
	}
	if b.Verdict != msg.VerdictDeny {
		return faultf("%s: ask %s lapses to %q; only an approval whose on-timeout verdict is deny lapses", recordWhere(r), b.Ask, b.Verdict)
	}
	k.verdict = msg.VerdictDeny
	return nil
}
