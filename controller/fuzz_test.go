package controller

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// fuzzController has one configured application and no journal: plan
// never touches the journal.
func fuzzController() *Controller {
	return &Controller{cfg: &Config{Name: "dev"}, led: ledger.New(), log: slog.Default(),
		bind: &Binding{Routes: map[string]msg.RouteRecord{"appliance": {Route: "r", Application: "appliance", Prefix: "/v1"}}}}
}

// FuzzPlanArgs feeds agent-controlled tool arguments to the validator: it
// must never panic, and what it accepts must be within the bounds.
func FuzzPlanArgs(f *testing.F) {
	c := fuzzController()
	f.Fuzz(func(t *testing.T, discover bool, raw []byte) {
		tool := ToolCall
		if discover {
			tool = ToolDiscover
		}
		p, err := c.plan(context.Background(), tool, raw, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrArguments) {
				t.Fatalf("error does not wrap ErrArguments: %v", err)
			}
			return
		}
		if len(p.req.Body) > 65536 || len(p.requestID) > 80 || len(p.scopedID) > 80 || len(p.operation) > 160 || len(p.query) > 256 {
			t.Fatalf("accepted past a bound: %+v", p)
		}
	})
}

// FuzzForegroundRequest decodes foreground frames as the socket does.
func FuzzForegroundRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var r foreground.Request
		if err := wire.Unmarshal(b, &r); err != nil {
			return
		}
		if _, err := wire.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}
