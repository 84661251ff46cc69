package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/views"
)

// agentStore is an initialised store with controller ctl pinned, for the
// agent commands.
func agentStore(t *testing.T) string {
	t.Helper()
	dir := peertest.ShortDir(t)
	store := filepath.Join(dir, "store")
	if code, _, errs := hosttest.RunCLI("init", "--store", store); code != 0 {
		t.Fatal(errs)
	}
	keys := filepath.Join(dir, "controller.pub")
	os.WriteFile(keys, peertest.NewPeer(t, "ctl").KeysFile(), 0o644)
	if code, _, errs := hosttest.RunCLI("controller", "add", "ctl", "--uid", "0", "--keys", keys, "--control", "/run/steward/host/control-ctl.sock", "--store", store); code != 0 {
		t.Fatal(errs)
	}
	return store
}

// TestAgentCommands: agent set records signed limits, each later set the
// next revision replacing the one before; show and list print them, a
// flag not given is not limited.
func TestAgentCommands(t *testing.T) {
	store := agentStore(t)
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := hosttest.RunCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	out := must("agent", "set", "alice", "--controller", "ctl", "--operations", "app/calc.*", "--calls-per-day", "5",
		"--credits-per-day", "0", "--rate", "10", "--burst", "3", "--store", store)
	if out != "agent alice of controller ctl: revision 1\n" {
		t.Fatalf("set: %q", out)
	}
	var v views.AgentView
	json.Unmarshal([]byte(must("agent", "show", "alice", "--controller", "ctl", "--store", store, "--json")), &v)
	if v.Revision != 1 || v.CallsPerDay == nil || *v.CallsPerDay != 5 || v.CreditsPerDay == nil || *v.CreditsPerDay != 0 ||
		v.CreditsPerConversation != nil || v.ConversationsPerDay != 100 || *v.RatePerMinute != 10 || v.Burst != 3 ||
		strings.Join(v.Operations, ",") != "app/calc.*" {
		t.Fatalf("show: %+v", v)
	}
	if out := must("agent", "set", "alice", "--controller", "ctl", "--store", store); out != "agent alice of controller ctl: revision 2\n" {
		t.Fatalf("second set: %q", out)
	}
	must("agent", "set", "bob", "--controller", "ctl", "--conversations-per-day", "10000", "--store", store)
	var vs []views.AgentView
	json.Unmarshal([]byte(must("agent", "list", "--store", store, "--json")), &vs)
	if len(vs) != 2 || vs[0].Agent != "alice" || vs[0].Revision != 2 || vs[0].CallsPerDay != nil || len(vs[0].Operations) != 0 ||
		vs[1].Agent != "bob" || vs[1].ConversationsPerDay != 10000 {
		t.Fatalf("list: %+v", vs)
	}
	if out := must("agent", "list", "--store", store); !strings.Contains(out, "ctl\talice\trevision 2 [*]\tcalls 0/-") {
		t.Fatalf("list text: %q", out)
	}
	// The store reopened replays the records: the latest revision stands.
	s, err := operator.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.AgentShow("ctl", "alice"); err != nil || v.Revision != 2 {
		t.Fatalf("after reopen: %+v %v", v, err)
	}
	s.Close()
}

// TestAgentSetBounds: every bound of agent set, one past it, is refused
// with its one line, exit 2, and nothing is recorded.
func TestAgentSetBounds(t *testing.T) {
	store := agentStore(t)
	ops := func(n int) []string {
		var a []string
		for i := range n {
			a = append(a, "--operations", fmt.Sprintf("app/op%d", i))
		}
		return a
	}
	long := strings.Repeat("a", 33)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"uid:07"}, `agent "uid:07": uid:N names a legacy allow-list peer by its uid, in decimal (0 to 4294967295)`},
		{[]string{"uid:4294967296"}, `agent "uid:4294967296": uid:N names a legacy allow-list peer by its uid, in decimal (0 to 4294967295)`},
		{[]string{"a:b"}, `agent name "a:b": ':' is reserved (uid:N names a legacy allow-list peer)`},
		{[]string{long}, `agent name "` + long + `": must be 1 to 32 of a-z0-9_-, first a letter`},
		{[]string{"Alice"}, `agent name "Alice": must be 1 to 32 of a-z0-9_-, first a letter`},
		{[]string{"1a"}, `agent name "1a": must be 1 to 32 of a-z0-9_-, first a letter`},
		{append([]string{"alice"}, ops(65)...), `agent alice: 65 operation patterns, the bound is 64`},
		{[]string{"alice", "--operations", "calc.add"}, `agent alice: operation pattern "calc.add": must be APPLICATION/OPERATION, at most 160 bytes`},
		{[]string{"alice", "--operations", "app/" + strings.Repeat("o", 157)},
			`agent alice: operation pattern "app/` + strings.Repeat("o", 76) + `...": must be APPLICATION/OPERATION, at most 160 bytes`},
		{[]string{"alice", "--operations", "app/a/b"}, `agent alice: operation pattern "app/a/b": must be APPLICATION/OPERATION, at most 160 bytes`},
		{[]string{"alice", "--operations", "app/[x"}, `agent alice: operation pattern "app/[x": syntax error in pattern`},
		{[]string{"alice", "--conversations-per-day", "10001"}, `agent alice: 10001 conversations per day, the bound is 10000`},
		{[]string{"alice", "--rate", "0"}, `agent alice: a rate of 0 calls per minute admits nothing: give --calls-per-day 0 to stop the agent`},
		{[]string{"alice", "--burst", "2"}, `agent alice: a burst needs a rate (--rate)`},
		{[]string{"alice", "--rate", "1000001"}, `agent alice: a rate of 1000001 calls per minute, the bound is 1000000`},
		{[]string{"alice", "--rate", "5", "--burst", "10001"}, `agent alice: a burst of 10001 calls, the bound is 10000`},
		{[]string{"alice", "--controller", "nope"}, `agent alice: no controller named nope`},
	} {
		args := append([]string{"agent", "set"}, c.args...)
		if !strings.Contains(strings.Join(c.args, " "), "--controller") {
			args = append(args, "--controller", "ctl")
		}
		code, _, errs := hosttest.RunCLI(append(args, "--store", store)...)
		if want := "steward-operator agent set: refused: " + c.want + "\n"; code != cli.ExitRefused || errs != want {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, errs, want)
		}
	}
	// At the bounds (64 patterns, one of 160 bytes, a 32-byte name): accepted.
	if code, _, errs := hosttest.RunCLI(append(append([]string{"agent", "set", strings.Repeat("a", 32), "--controller", "ctl",
		"--operations", "app/" + strings.Repeat("o", 156),
		"--conversations-per-day", "10000", "--rate", "1000000", "--burst", "10000"}, ops(63)...), "--store", store)...); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := hosttest.RunCLI("agent", "show", "bob", "--controller", "ctl", "--store", store); code != cli.ExitRefused ||
		errs != "steward-operator agent show: refused: agent bob of controller ctl has no limits record and its controller no default one (agent set '*'): only its grants and the payer limit it\n" {
		t.Fatalf("show unknown: %d %q", code, errs)
	}
	var vs []views.AgentView
	_, out, _ := hosttest.RunCLI("agent", "list", "--store", store, "--json")
	if json.Unmarshal([]byte(out), &vs); len(vs) != 1 {
		t.Fatalf("only the set at the bounds is recorded: %s", out)
	}
}

// TestAgentSetThroughDaemon: while the host runs, agent set goes through
// its admin socket (the journal is locked) and takes effect at once; a
// refusal keeps its one line and exit 2.
func TestAgentSetThroughDaemon(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	w.Serve(t)
	if code, out, errs := hosttest.RunCLI("agent", "set", "alice", "--controller", "ctl", "--calls-per-day", "1", "--store", w.Store); code != 0 ||
		out != "agent alice of controller ctl: revision 1\n" {
		t.Fatalf("set through the daemon: %d %q %q", code, out, errs)
	}
	if code, _, errs := hosttest.RunCLI("agent", "set", "alice", "--controller", "ctl", "--rate", "0", "--store", w.Store); code != cli.ExitRefused ||
		errs != "steward-operator agent set: refused: agent alice: a rate of 0 calls per minute admits nothing: give --calls-per-day 0 to stop the agent\n" {
		t.Fatalf("refusal through the daemon: %d %q", code, errs)
	}
	if code, out, errs := hosttest.RunCLI("agent", "show", "alice", "--controller", "ctl", "--store", w.Store); code != 0 || !strings.Contains(out, "calls 0/1") {
		t.Fatalf("show while serving: %d %q %q", code, out, errs)
	}
}

// TestAgentSetPrincipals: the foreground socket's principal and a legacy
// allow-list peer's (uid:N) take limits and an approval policy as a
// configured agent does: every caller a dispatch can name can be limited.
func TestAgentSetPrincipals(t *testing.T) {
	store := agentStore(t)
	for _, agent := range []string{"foreground", "uid:0", "uid:2001", "uid:4294967295"} {
		code, out, errs := hosttest.RunCLI("agent", "set", agent, "--controller", "ctl", "--calls-per-day", "3", "--approve-ops", "app/pay.*", "--store", store)
		if code != 0 || out != "agent "+agent+" of controller ctl: revision 1\n" {
			t.Fatalf("agent set %s: exit %d %q %s", agent, code, out, errs)
		}
		var v views.AgentView
		_, out, _ = hosttest.RunCLI("agent", "show", agent, "--controller", "ctl", "--store", store, "--json")
		if json.Unmarshal([]byte(out), &v); v.Agent != agent || v.CallsPerDay == nil || *v.CallsPerDay != 3 ||
			v.Approval == nil || strings.Join(v.Approval.Operations, ",") != "app/pay.*" {
			t.Fatalf("agent show %s: %s", agent, out)
		}
	}
}
