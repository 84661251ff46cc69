package operator

import (
	"fmt"
	"testing"

	"github.com/stewardrt/steward/wire/msg"
)

// BenchmarkAgentCallUnmarked: charged invocations by an agent whose limits
// record carries an approval policy that does not mark the operation: the
// cost of a call not marked, to hold against the same call before
// approvals (it must not get slower: no new record, no new lock round).
func BenchmarkAgentCallUnmarked(b *testing.B) {
	w := newWorld(b, worldOpts{fund: 1 << 40, price: 1, perDay: 1 << 40})
	w.withStore(b, func(s *Store) {
		if _, err := s.SetAgentLimits(AgentSpec{Controller: "ctl", Agent: "alice",
			Approval: &msg.ApprovalPolicy{Operations: []string{"app/units.*"}}}); err != nil {
			b.Fatal(err)
		}
	})
	alice := "alice"
	w.peer.principal.Store(&alice)
	w.serve(b)
	cl := w.dial(b)
	run := benchRun.Add(1)
	runDispatchers(b, 1, func(i int64) error {
		return benchInvoke(b, cl, fmt.Sprintf("u%d-%d", run, i), "alice")
	})
}
