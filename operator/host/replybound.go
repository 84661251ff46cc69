package host

import (
	"context"
	"fmt"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// replySlack is what a reply's envelope adds to its body: the frame's
// type, channel, sequence, id, time and signature, well under it.
const replySlack = 4 << 10

// fitReplies answers, in place of a reply whose body would not fit the
// reply frame, a one-line refusal naming the bound. wire.Serve ends a
// channel whose reply cannot be sent (a caller must never wait for a
// dropped reply), and the control channel is shared by all of a
// controller's agents: one reply past the bound must not reset it for
// them. The pages of asks keep every reply far inside the bound
// (msg.AsksPageBytes); this is the guard behind them, for every reply
// of the control and admin sockets.
func fitReplies(h wire.Handler) wire.Handler {
	return wire.HandlerFunc(func(ctx context.Context, req *wire.Envelope) (string, any) {
		t, body := h.ServeFrame(ctx, req)
		b, err := wire.Marshal(body)
		if err != nil || len(b) <= wire.MaxReplyFrame-replySlack {
			return t, body // an error is Send's to report, as before
		}
		return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: fmt.Sprintf(
			"the %s answer of %d bytes would pass the reply frame bound of %d bytes; nothing was changed by reading it", req.T, len(b), wire.MaxReplyFrame)}
	})
}
