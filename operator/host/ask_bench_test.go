package host_test

import (
	"fmt"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// BenchmarkAgentCallUnmarked: charged invocations by an agent whose limits
// record carries an approval policy that does not mark the operation: the
// cost of a call not marked, to hold against the same call before
// approvals (it must not get slower: no new record, no new lock round).
func BenchmarkAgentCallUnmarked(b *testing.B) {
	w := hosttest.NewWorld(b, hosttest.Opts{Fund: 1 << 40, Price: 1, PerDay: 1 << 40})
	w.WithStore(b, func(s *operator.Store) {
		if _, err := s.SetAgentLimits(views.AgentSpec{Controller: "ctl", Agent: "alice",
			Approval: &msg.ApprovalPolicy{Operations: []string{"app/units.*"}}}); err != nil {
			b.Fatal(err)
		}
	})
	alice := "alice"
	w.Peer.Principal.Store(&alice)
	w.Serve(b)
	cl := w.Dial(b)
	run := benchRun.Add(1)
	runDispatchers(b, 1, func(i int64) error {
		return benchInvoke(b, cl, fmt.Sprintf("u%d-%d", run, i), "alice")
	})
}
