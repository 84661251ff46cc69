package controller

import (
	"errors"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// beginFailed answers a call whose begin record could not be journaled.
// Nothing was sent either way. A record the journal removed (or never
// wrote) leaves nothing behind: a refusal, and the requestId is free. After
// a failed fdatasync (journal.ErrFailed, and the controller exits) the
// begin may be on disk when the controller restarts and reads what is
// really there, so the requestId may come back as an uncertain attempt: the
// call is answered uncertain, never a plain refusal, so that the agent
// does not take the requestId for unused.
func (c *Controller) beginFailed(id string, err error) *ToolResult {
	if errors.Is(err, journal.ErrFailed) && !errors.Is(err, journal.ErrNotWritten) {
		c.led.Unfinished(id, "the controller journal failed while recording the call; nothing was sent")
		c.log.Error("journal begin: the journal failed; whether the begin is on disk is unknown until the controller restarts; nothing sent", "attempt", id, "err", err)
		return &ToolResult{Outcome: msg.StateUncertain, AttemptID: id,
			Detail: "the controller journal failed while recording the call: nothing was sent to the host, and whether the call is recorded is known only once the controller has restarted"}
	}
	c.led.Abort(id)
	c.log.Error("journal begin failed; nothing sent", "attempt", id, "err", err)
	return refused(msg.CodeJournal, "the controller journal refused the call; nothing was sent", "")
}
