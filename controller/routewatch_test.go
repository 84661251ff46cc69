package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/wire/msg"
)

// TestWatchedRoutesSendNoLookup: once the host pushes the route table, the
// calls, discoveries and overviews of a session read their routes from it
// and send no routes frame; an application the table does not hold is
// still looked up (once per such call) and refused as before.
func TestWatchedRoutesSendNoLookup(t *testing.T) {
	s := newStack(t, stackOpts{price: 1, funded: 100})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	<-s.live.routes.firstWatch
	cs := s.client(ctx)
	before := s.live.routes.lookupCount()
	for i := range 5 {
		args := callArgs("watched-"+string(rune('a'+i)), map[string]any{"text": "x"})
		if r, res := call(t, ctx, cs, ToolCall, args); res.IsError || r.Status != 200 {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	if ov := overviewOf(t, ctx, cs); len(ov.Applications) != 1 {
		t.Fatalf("overview: %+v", ov.Applications)
	}
	if n := s.live.routes.lookupCount() - before; n != 0 {
		t.Fatalf("%d routes lookups sent with the table watched, want 0", n)
	}
	d, _ := call(t, ctx, cs, ToolDiscover, map[string]any{"application": "nosuch", "query": "x"})
	if d.Refusal == nil || d.Refusal.Code != msg.CodeBadRequest || !strings.Contains(d.Refusal.Reason, `"nosuch" is not an application of this controller`) {
		t.Fatalf("unknown application: %+v", d)
	}
	if n := s.live.routes.lookupCount() - before; n != 1 {
		t.Fatalf("%d routes lookups for an application the table lacks, want 1", n)
	}
}
