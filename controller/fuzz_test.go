package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// fuzzController has one application, appliance, on a control socket
// (tableController), and no journal: plan never touches the journal.
func fuzzController(t testing.TB) *Controller {
	c, _ := tableController(t, nil)
	return c
}

// FuzzPlanArgs feeds agent-controlled tool arguments to the validator: it
// must never panic, and what it accepts must be within the bounds.
func FuzzPlanArgs(f *testing.F) {
	c := fuzzController(f)
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

// FuzzAdviseArgs feeds an advisor's steward_advise arguments to their
// check: it must never panic, a refusal is an argument refusal, and what
// it accepts is an ask id, a verdict and one line within the bound.
func FuzzAdviseArgs(f *testing.F) {
	f.Add([]byte(`{"ask":"ask-0123456789ab","verdict":"approve","sentence":"fine"}`))
	f.Add([]byte(`{"ask":"ask-0123456789ab","verdict":"wait","sentence":"a\nb"}`))
	f.Add([]byte(`{"ask":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := adviseArgs(raw)
		if err != nil {
			if !errors.Is(err, ErrArguments) {
				t.Fatalf("error does not wrap ErrArguments: %v", err)
			}
			return
		}
		if !askIDRe.MatchString(a.Ask) || len(a.Sentence) == 0 || len(a.Sentence) > msg.MaxAdviceSentence || strings.ContainsAny(a.Sentence, "\r\n") {
			t.Fatalf("accepted past a bound: %+v", a)
		}
		switch msg.Verdict(a.Verdict) {
		case msg.VerdictApprove, msg.VerdictDeny, msg.VerdictWait:
		default:
			t.Fatalf("accepted verdict %q", a.Verdict)
		}
	})
}
