package host

import (
	"context"
	"strconv"
	"testing"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestFitReplies: a reply whose body would pass the reply frame is
// answered by one line naming the bound (so wire.Serve sends it and the
// shared channel lives on); one that fits, up to the bound less the
// envelope's room, is sent as it is.
func TestFitReplies(t *testing.T) {
	var size int
	h := fitReplies(wire.HandlerFunc(func(context.Context, *wire.Envelope) (string, any) {
		return msg.TypeAsksResult, msg.AsksResult{Asks: []msg.AskView{{ID: "ask-000000000000", Arguments: make([]byte, size)}}}
	}))
	overhead := func() int {
		size = 0
		b, _ := wire.Marshal(msg.AsksResult{Asks: []msg.AskView{{ID: "ask-000000000000"}}})
		return len(b) + 4 // a byte string's head grows by 4 bytes past 65,535
	}()
	size = wire.MaxReplyFrame - replySlack - overhead
	if typ, body := h.ServeFrame(context.Background(), &wire.Envelope{T: msg.TypeAsks}); typ != msg.TypeAsksResult {
		t.Fatalf("a reply at the bound: %s %v", typ, body)
	}
	size++
	typ, body := h.ServeFrame(context.Background(), &wire.Envelope{T: msg.TypeAsks})
	ref, ok := body.(msg.Refusal)
	b, _ := wire.Marshal(msg.AsksResult{Asks: []msg.AskView{{ID: "ask-000000000000", Arguments: make([]byte, size)}}})
	want := "the asks answer of " + strconv.Itoa(len(b)) + " bytes would pass the reply frame bound of 1048576 bytes; nothing was changed by reading it"
	if typ != msg.TypeRefused || !ok || ref.Code != msg.CodeInternal || ref.Reason != want {
		t.Fatalf("one byte past: %s %+v, want %q", typ, body, want)
	}
}
