package audit

import (
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// ClockAccept keeps an operator's acceptance of the wall clock (`clock
// accept`): it moves no credit and signs no receipt, so it is evidence of
// nothing the audit checks, but one that is not behind the time it names
// is a record replay would refuse.
func (a *journalAudit) ClockAccept(r journal.Record, b *hostlog.ClockAccept) error {
	if err := b.Check(); err != nil {
		return faultf("%s: %v", recordWhere(r), err)
	}
	return nil
}
