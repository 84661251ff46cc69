package operator

import (
	"context"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// checkpointInterval is the least time between two checkpoints.
const checkpointInterval = time.Second

// checkpointLoop signs the durable receipt chain head after outcomes are
// journaled, at most once per checkpointInterval: every receipt is covered
// by a hybrid (post-quantum) signature within about a second.
func (h *Host) checkpointLoop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		if wait := checkpointInterval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return // Serve signs the last checkpoint after the work drains
			case <-t.C:
			}
		}
		if err := h.checkpoint(); err != nil {
			h.log.Error("steward-operator: checkpoint", "err", err)
		}
		last = time.Now()
	}
}

// checkpoint signs and journals a checkpoint over the durable chain head,
// if it moved since the last one.
func (h *Host) checkpoint() error {
	s := h.s
	s.mu.Lock()
	seq, head, done := s.st.durableSeq, s.st.durableHead, s.st.checkpoint
	s.mu.Unlock()
	if seq <= done {
		return nil
	}
	signed, err := msg.SignCheckpoint(s.key, msg.Checkpoint{Seq: seq, Head: head, At: s.clock().UnixMilli()})
	if err != nil {
		return err
	}
	if _, err := s.append(kindCheckpoint, recCheckpoint{Checkpoint: signed, Seq: seq}); err != nil {
		return err
	}
	s.mu.Lock()
	if seq > s.st.checkpoint {
		s.st.checkpoint = seq
	}
	s.mu.Unlock()
	return nil
}
