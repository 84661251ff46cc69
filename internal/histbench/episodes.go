package histbench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/dev"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The appliance's failpoints (appliance/invoke.go): it kills itself just
// before or just after journaling an answer, so that the host has sent
// the request and reads no answer: the attempt is uncertain.
const (
	failBeforeJournal = "appliance-before-journal"
	failAfterJournal  = "appliance-after-journal"
)

// episodes runs, with nothing else in flight, what the bulk traffic does
// not: every operator action that journals a record, calls not sent,
// uncertain attempts and their resolutions, and an ask raised to expire
// after the day's step (expireRaised, then expireCollect after it).
func (g *generator) episodes(ctx context.Context) error {
	g.episode++
	for _, ep := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"freeze", g.epFreeze},
		{"route", g.epRoute},
		{"grant", g.epGrant},
		{"agent limits", g.epAgentLimits},
		{"not sent", g.epNotSent},
		{"redeliver", g.epRedeliver},
		{"release", g.epRelease},
		{"charge", g.epCharge},
	} {
		if err := ep.run(ctx); err != nil {
			return fmt.Errorf("episode %d, %s: %w", g.episode, ep.name, err)
		}
	}
	return nil
}

// epCall makes one call of the episode named name and counts it.
func (g *generator) epCall(ctx context.Context, name string, op string, args map[string]any) (outcome, error) {
	g.epSeq++
	k := invoke("episode-"+name, 0, op, args)
	k.args["requestId"] = "e" + strconv.Itoa(g.episode) + "-" + name + "-" + strconv.Itoa(g.epSeq)
	o, _, err := g.ep.do(ctx, k)
	if err == nil {
		g.tally.add(k.kind, o)
	}
	return o, err
}

func sha(text string) map[string]any { return map[string]any{"text": text} }

// epFreeze: purse-freeze, a call refused at admission, purse-thaw.
func (g *generator) epFreeze(ctx context.Context) error {
	if _, err := g.s.admin(ctx, admin.Request{Op: admin.OpPurseFreeze, Name: dev.ControllerName}); err != nil {
		return err
	}
	if _, err := g.epCall(ctx, "frozen", "text.sha256", sha("frozen")); err != nil {
		return err
	}
	_, err := g.s.admin(ctx, admin.Request{Op: admin.OpPurseThaw, Name: dev.ControllerName})
	return err
}

// epRoute: route-state twice (deactivated, a call refused, activated).
func (g *generator) epRoute(ctx context.Context) error {
	if _, err := g.s.admin(ctx, admin.Request{Op: admin.OpRouteDeactivate, Name: dev.RouteName}); err != nil {
		return err
	}
	if _, err := g.epCall(ctx, "inactive", "text.sha256", sha("inactive")); err != nil {
		return err
	}
	_, err := g.s.admin(ctx, admin.Request{Op: admin.OpRouteActivate, Name: dev.RouteName})
	return err
}

// epGrant: grant-issue and grant-revoke of a second grant, with no call
// between them (which grant admits a call stays the dev mode's).
func (g *generator) epGrant(ctx context.Context) error {
	now := g.s.now()
	rep, err := g.s.admin(ctx, admin.Request{Op: admin.OpGrantIssue, Grant: &admin.Grant{
		Controller: dev.ControllerName, Application: dev.Application, Operations: []string{"units.*"},
		Price: 2, PerDay: 10, NotBefore: now.UnixMilli(), NotAfter: now.Add(time.Hour).UnixMilli()}})
	if err != nil {
		return err
	}
	if rep.Grant == nil {
		return fmt.Errorf("grant issue answered no grant")
	}
	_, err = g.s.admin(ctx, admin.Request{Op: admin.OpGrantRevoke, Name: rep.Grant.ID})
	return err
}

// agentSpec is the MCP agent's limits: no limit but the approval of
// markedOp (asks that expire after an hour, denied then).
func agentSpec(uid uint32) *views.AgentSpec {
	return &views.AgentSpec{Controller: dev.ControllerName, Agent: "uid:" + strconv.FormatUint(uint64(uid), 10),
		ConversationsPerDay: 10_000,
		Approval: &msg.ApprovalPolicy{Operations: []string{dev.Application + "/" + markedOp},
			ParkMs: (5 * time.Second).Milliseconds(), ExpiryMs: time.Hour.Milliseconds(), OnTimeout: msg.VerdictDeny}}
}

// epAgentLimits: agent-limits, the next revision of the same limits.
func (g *generator) epAgentLimits(ctx context.Context) error {
	_, err := g.s.admin(ctx, admin.Request{Op: admin.OpAgentSet, Agent: agentSpec(g.uid)})
	return err
}

// epNotSent: not-sent.v2, the appliance stopped while two calls are made.
func (g *generator) epNotSent(ctx context.Context) error {
	if err := g.s.app.stop(); err != nil {
		return err
	}
	g.s.app = nil
	for _, t := range []string{"not sent 1", "not sent 2"} {
		o, err := g.epCall(ctx, "not-sent", "text.sha256", sha(t+" "+strconv.Itoa(g.episode)))
		if err != nil {
			return err
		}
		if o.Outcome != msg.StateNotSent {
			return fmt.Errorf("a call with the appliance stopped ended %s, not %s", o.Outcome, msg.StateNotSent)
		}
	}
	return g.s.startApp()
}

// uncertain makes one call that the appliance, armed with failpoint, dies
// on, restarts the appliance, and returns the uncertain attempt.
func (g *generator) uncertain(ctx context.Context, name, failpoint string) (string, map[string]any, error) {
	if err := g.s.app.stop(); err != nil {
		return "", nil, err
	}
	g.s.app = nil
	if err := g.s.startApp("STEWARD_FAILPOINT=" + failpoint); err != nil {
		return "", nil, err
	}
	g.epSeq++
	k := invoke("episode-"+name, 0, "text.sha256", sha(name+" "+strconv.Itoa(g.epSeq)))
	k.args["requestId"] = "e" + strconv.Itoa(g.episode) + "-" + name + "-" + strconv.Itoa(g.epSeq)
	o, _, err := g.ep.do(ctx, k)
	if err != nil {
		return "", nil, err
	}
	g.tally.add(k.kind, o)
	if err := g.s.app.waitDead(time.Minute); err != nil {
		return "", nil, err
	}
	g.s.app = nil
	if o.Outcome != msg.StateUncertain {
		return "", nil, fmt.Errorf("a call the appliance died on ended %s, not %s", o.Outcome, msg.StateUncertain)
	}
	return o.AttemptID, k.args, nil
}

func (g *generator) resolve(ctx context.Context, attempt, action, reason string) (*views.AttemptView, error) {
	rep, err := g.s.admin(ctx, admin.Request{Op: admin.OpAttemptResolve,
		Resolve: &views.ResolveRequest{Attempt: attempt, Action: action, Reason: reason}})
	return rep.Attempt, err
}

// callAgain asks again with an episode call's requestId: the controller
// learns the host's resolution and records it.
func (g *generator) callAgain(ctx context.Context, name string, args map[string]any, want msg.State) error {
	o, _, err := g.ep.do(ctx, call{kind: "episode-" + name + "-again", tool: toolCall, args: args})
	if err != nil {
		return err
	}
	g.tally.add("episode-"+name+"-again", o)
	if o.Outcome != want {
		return fmt.Errorf("the call again after the resolution ended %s, not %s", o.Outcome, want)
	}
	return nil
}

// epRedeliver: uncertain (the appliance died after journaling its
// answer), a redelivery that fails (the appliance still down: another
// uncertain record), one that works (redeliver, outcome.v2: the
// appliance replays its answer), and the call again.
func (g *generator) epRedeliver(ctx context.Context) error {
	attempt, args, err := g.uncertain(ctx, "redeliver", failAfterJournal)
	if err != nil {
		return err
	}
	if _, err := g.resolve(ctx, attempt, views.ResolveRedeliver, "histgen: the appliance is down"); err == nil {
		return fmt.Errorf("a redelivery to a stopped appliance worked")
	}
	if err := g.s.startApp(); err != nil {
		return err
	}
	if _, err := g.resolve(ctx, attempt, views.ResolveRedeliver, "histgen: the appliance is back"); err != nil {
		return err
	}
	return g.callAgain(ctx, "redeliver", args, msg.StateDefinite)
}

// epRelease: uncertain (the appliance died before journaling), released
// by the operator, and resolved on the controller by its foreground
// `attempts resolve` (resolve.v2).
func (g *generator) epRelease(ctx context.Context) error {
	attempt, _, err := g.uncertain(ctx, "release", failBeforeJournal)
	if err != nil {
		return err
	}
	if err := g.s.startApp(); err != nil {
		return err
	}
	if _, err := g.resolve(ctx, attempt, views.ResolveRelease, "histgen: it never ran"); err != nil {
		return err
	}
	rep, err := foreground.Call(ctx, g.s.l.ForegroundSocket, g.uid, foreground.Request{Op: foreground.OpResolve, ID: attempt})
	if err != nil {
		return fmt.Errorf("controller attempts resolve %s: %w", attempt, err)
	}
	var ins struct {
		State msg.State `json:"state"`
	}
	if err := json.Unmarshal(rep.Result, &ins); err != nil {
		return fmt.Errorf("controller attempts resolve %s: %w", attempt, err)
	}
	return nil
}

// epCharge: uncertain (the appliance died after journaling), charged by
// the operator as performed, and the call again.
func (g *generator) epCharge(ctx context.Context) error {
	attempt, args, err := g.uncertain(ctx, "charge", failAfterJournal)
	if err != nil {
		return err
	}
	if err := g.s.startApp(); err != nil {
		return err
	}
	if _, err := g.resolve(ctx, attempt, views.ResolveCharge, "histgen: it ran, its answer was lost"); err != nil {
		return err
	}
	return g.callAgain(ctx, "charge", args, msg.StatePerformed)
}

// expireRaised raises an ask no one answers: its call parks, then ends
// still awaiting approval. After the day's step its expiry is due.
func (g *generator) expireRaised(ctx context.Context) error {
	g.epSeq++
	k := marked(0, justExpire)
	k.kind = "episode-expire"
	k.args["requestId"] = "e" + strconv.Itoa(g.episode) + "-expire-" + strconv.Itoa(g.epSeq)
	o, _, err := g.ep.once(ctx, k)
	if err != nil {
		return err
	}
	if o.Outcome != msg.StateAwaitingApproval {
		return fmt.Errorf("an unanswered marked call ended %s, not %s", o.Outcome, msg.StateAwaitingApproval)
	}
	g.expiring = k.args
	return nil
}

// expireCollect, after the step: reading the asks applies the expiry
// (ask-expired, denied), and the call again collects its refusal.
func (g *generator) expireCollect(ctx context.Context) error {
	if g.expiring == nil {
		return nil
	}
	if _, err := g.s.admin(ctx, admin.Request{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{}}); err != nil {
		return err
	}
	err := g.callAgain(ctx, "expire", g.expiring, msg.StateRefused)
	g.expiring = nil
	return err
}
