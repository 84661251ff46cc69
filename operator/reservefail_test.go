package operator

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// TestReserveFailedSaysWhatIsKnown: a reservation record the journal
// removed charged nothing (refused); one whose fdatasync failed may be on
// disk after the restart, so the attempt is uncertain, never "nothing
// charged", and a retry cannot be charged twice without the operator.
func TestReserveFailedSaysWhatIsKnown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &msg.Dispatch{Attempt: "a1"}
	removed := reserveFailed(d, fmt.Errorf("append: %w", journal.ErrNotWritten), log)
	if removed.Outcome != msg.StateRefused || removed.Refusal == nil || removed.Refusal.Code != msg.CodeJournal ||
		removed.Refusal.Reason != "the host could not journal the reservation; nothing was sent or charged" {
		t.Fatalf("a removed record: %+v", removed)
	}
	unknown := reserveFailed(d, fmt.Errorf("append: %w", journal.ErrFailed), log)
	if unknown.Outcome != msg.StateUncertain || unknown.Refusal != nil ||
		unknown.Detail != "the host journal failed while recording the reservation: nothing was sent to the application, and whether it is reserved is known only once the host has restarted" {
		t.Fatalf("a failed fdatasync: %+v", unknown)
	}
	if errors.Is(journal.ErrNotWritten, journal.ErrFailed) {
		t.Fatal("the journal's two failures must be told apart")
	}
}

// TestAskFailedSaysWhatIsKnown: an ask record the journal removed is not
// there (refused, nothing reserved or sent); one whose fdatasync failed may
// be on disk after the restart, so the attempt is uncertain, never a
// refusal the controller would replay while the ask waited.
func TestAskFailedSaysWhatIsKnown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	removed := askFailed("a1", fmt.Errorf("append: %w", journal.ErrNotWritten), log)
	if removed.Outcome != msg.StateRefused || removed.Refusal == nil || removed.Refusal.Code != msg.CodeJournal ||
		removed.Refusal.Reason != "the host could not journal the ask; nothing was reserved or sent" || removed.Ask != nil {
		t.Fatalf("a removed ask record: %+v", removed)
	}
	unknown := askFailed("a1", fmt.Errorf("append: %w", journal.ErrFailed), log)
	if unknown.Outcome != msg.StateUncertain || unknown.Refusal != nil || unknown.Ask != nil ||
		unknown.Detail != "the host journal failed while recording the call's ask: nothing was reserved or sent, and whether the ask is recorded is known only once the host has restarted" {
		t.Fatalf("a failed fdatasync: %+v", unknown)
	}
}
