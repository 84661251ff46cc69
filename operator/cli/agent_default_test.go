package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/operator/views"
)

// TestAgentDefaultCommands: agent set '*' records the controller's
// default record, revised like any agent's; list shows it as agent *, and
// show of an agent without a record of its own prints the default's
// limits, marked as the default's, with that agent's counts.
func TestAgentDefaultCommands(t *testing.T) {
	store := agentStore(t)
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := hosttest.RunCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	if out := must("agent", "set", "*", "--controller", "ctl", "--calls-per-day", "3", "--store", store); out != "agent * of controller ctl: revision 1\n" {
		t.Fatalf("set: %q", out)
	}
	if out := must("agent", "set", "*", "--controller", "ctl", "--calls-per-day", "2", "--approve-ops", "app/calc.*", "--store", store); out != "agent * of controller ctl: revision 2\n" {
		t.Fatalf("second set: %q", out)
	}
	var vs []views.AgentView
	json.Unmarshal([]byte(must("agent", "list", "--store", store, "--json")), &vs)
	if len(vs) != 1 || vs[0].Agent != "*" || vs[0].Revision != 2 || vs[0].Record != "" || *vs[0].CallsPerDay != 2 || vs[0].Approval == nil {
		t.Fatalf("list: %+v", vs)
	}
	var v views.AgentView
	json.Unmarshal([]byte(must("agent", "show", "uid:2001", "--controller", "ctl", "--store", store, "--json")), &v)
	if v.Agent != "uid:2001" || v.Record != "*" || v.Revision != 2 || *v.CallsPerDay != 2 || v.CallsToday != 0 {
		t.Fatalf("show under the default: %+v", v)
	}
	out := must("agent", "show", "uid:2001", "--controller", "ctl", "--store", store)
	if want := "ctl\tuid:2001 (under the default record *)\trevision 2 [*]\tcalls 0/2, credits 0/- today"; len(out) < len(want) || out[:len(want)] != want {
		t.Fatalf("show: %q, want it to start %q", out, want)
	}
}
