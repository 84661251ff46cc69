package ctlconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/internal/testenv"
)

// agentsConfig is a valid config whose agents are agents.
func agentsConfig(t *testing.T, agents map[string]any) []byte {
	t.Helper()
	m := map[string]any{
		"name": "dev", "stateDir": "/s", "keyDir": "/k", "bundle": "/b",
		"sockets": map[string]any{"mcp": "/m.sock", "reverse": "/r.sock", "foreground": "/f.sock"},
		"agents":  agents,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func named(entries ...map[string]string) map[string]any {
	return map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": entries}
}

// TestAgentNames: the name syntax at its bounds, each refusal exact.
func TestAgentNames(t *testing.T) {
	for _, good := range []string{"a", "alice", "ci-bot_2", strings.Repeat("z", MaxAgentName)} {
		if err := ValidateAgentName(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for bad, want := range map[string]string{
		"":                                  `agent name "" must be 1 to 32 bytes`,
		strings.Repeat("z", MaxAgentName+1): fmt.Sprintf(`agent name %q must be 1 to 32 bytes`, strings.Repeat("z", MaxAgentName+1)),
		"1a":                                `agent name "1a" must start with a letter a-z`,
		"_a":                                `agent name "_a" must start with a letter a-z`,
		"Alice":                             `agent name "Alice" must start with a letter a-z`,
		"alIce":                             `agent name "alIce" has byte 'I' at offset 2, not one of a-z0-9_-`,
		"uid:1":                             `agent name "uid:1" has byte ':' at offset 3, not one of a-z0-9_-`,
		"a.b":                               `agent name "a.b" has byte '.' at offset 1, not one of a-z0-9_-`,
		PrincipalForeground:                 `agent name "foreground" is reserved for the foreground socket`,
	} {
		if err := ValidateAgentName(bad); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", bad, err, want)
		}
	}
}

// TestAgentsNamedRefusals: a uid two entries match is refused at parse,
// naming both entries; so are two entries giving one name, a malformed
// entry, an unknown account and one entry past the bound. root (uid 0)
// and daemon exist on every system the tests run on.
func TestAgentsNamedRefusals(t *testing.T) {
	root := map[string]string{"name": "ops", "account": "root"}
	for _, tc := range []struct {
		what   string
		agents map[string]any
		want   string
	}{
		{"one uid, two named entries", named(root, map[string]string{"name": "ops2", "account": "root"}),
			`agents.named[1] {name "ops2", account "root"} maps uid 0, which agents.named[0] {name "ops", account "root"} already maps: a uid may match one entry only`},
		{"named and uids", map[string]any{"uids": []uint32{0}, "gids": []uint32{}, "named": []any{root}},
			`agents.named[0] {name "ops", account "root"} maps uid 0, which agents.uids also admits: a uid may match one entry only`},
		{"named and gids", map[string]any{"uids": []uint32{}, "gids": []uint32{0}, "named": []any{root}},
			`agents.named[0] {name "ops", account "root"} maps uid 0, whose primary gid 0 agents.gids also admits: a uid may match one entry only`},
		{"one name, two accounts", named(root, map[string]string{"name": "ops", "account": "daemon"}),
			`agents.named[1] {name "ops", account "daemon"} names agent "ops", as agents.named[0] {name "ops", account "root"} does: agent names must differ`},
		{"both forms", named(map[string]string{"name": "ops", "account": "root", "group": "root"}),
			`agents.named[0]: an entry is {name, account} or {group}, not both`},
		{"no account", named(map[string]string{"name": "ops"}),
			`agents.named[0]: an entry is {name, account} or {group}: name and account are both required`},
		{"bad name", named(map[string]string{"name": "Ops", "account": "root"}),
			`agents.named[0] {name "Ops", account "root"}: agent name "Ops" must start with a letter a-z`},
		{"reserved name", named(map[string]string{"name": "foreground", "account": "root"}),
			`agents.named[0] {name "foreground", account "root"}: agent name "foreground" is reserved for the foreground socket`},
		{"unknown account", named(map[string]string{"name": "ops", "account": "stwt-no-such-account"}),
			`agents.named[0] {name "ops", account "stwt-no-such-account"}: account "stwt-no-such-account": user: unknown user stwt-no-such-account`},
		{"unknown group", named(map[string]string{"group": "stwt-no-such-group"}),
			`agents.named[0] {group "stwt-no-such-group"}: group: unknown group stwt-no-such-group`},
	} {
		_, err := Parse(agentsConfig(t, tc.agents))
		if !errors.Is(err, ErrConfig) || err.Error() != "controller config refused: "+tc.want {
			t.Errorf("%s:\n got %v\nwant controller config refused: %s", tc.what, err, tc.want)
		}
	}

	// The number of entries, at the bound (all refused later for sharing
	// root's uid, so the bound is what is checked) and one past it.
	var many []map[string]string
	for i := range MaxNamedAgents + 1 {
		many = append(many, map[string]string{"name": fmt.Sprintf("a%d", i), "account": "root"})
	}
	_, err := Parse(agentsConfig(t, named(many[:MaxNamedAgents]...)))
	if err == nil || strings.Contains(err.Error(), "bound") {
		t.Fatalf("at the bound: %v, want the shared uid refused, not the count", err)
	}
	_, err = Parse(agentsConfig(t, named(many...)))
	if err == nil || err.Error() != "controller config refused: agents.named: 257 entries exceeds the bound of 256" {
		t.Fatalf("one past the bound: %v", err)
	}
}

// TestAgentOf: a named account's uid is its agent whatever its gid; the
// legacy uids and gids admit "uid:N"; anyone else is not admitted.
func TestAgentOf(t *testing.T) {
	c, err := Parse(agentsConfig(t, map[string]any{"uids": []uint32{4000}, "gids": []uint32{4100},
		"named": []any{map[string]string{"name": "ops", "account": "root"}}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uid, gid uint32
		name     string
		ok       bool
	}{
		{0, 0, "ops", true}, {0, 4100, "ops", true}, {4000, 1, "uid:4000", true}, {4001, 4100, "uid:4001", true}, {4001, 4101, "", false},
	} {
		if name, ok := c.AgentOf(tc.uid, tc.gid); name != tc.name || ok != tc.ok {
			t.Errorf("uid %d gid %d: %q %v, want %q %v", tc.uid, tc.gid, name, ok, tc.name, tc.ok)
		}
	}
}

// TestAgentsGroup expands a group of real accounts into agents named after
// them (its member list), and refuses a member a named entry also maps.
func TestAgentsGroup(t *testing.T) {
	testenv.NeedRoot(t, "to create the accounts and the group of agents")
	stem, err := testaccount.NextStem()
	if err != nil {
		t.Fatal(err)
	}
	group := stem + "agents"
	if _, err := testaccount.CreateGroup(group); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testaccount.RemoveGroup(group); err != nil {
			t.Errorf("removing the test group: %v", err)
		}
	})
	a := testaccount.New(t, "a", group)
	b := testaccount.New(t, "b", group)
	other := testaccount.New(t, "c")

	c, err := Parse(agentsConfig(t, named(map[string]string{"group": group}, map[string]string{"name": "other", "account": other.Name})))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]string{a.UID: a.Name, b.UID: b.Name, other.UID: "other"}
	if got := c.AgentNames(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("agents %v, want %v", got, want)
	}
	if name, ok := c.AgentOf(b.UID, b.GID); !ok || name != b.Name {
		t.Fatalf("member %s: %q %v", b.Name, name, ok)
	}

	_, err = Parse(agentsConfig(t, named(map[string]string{"name": "bee", "account": b.Name}, map[string]string{"group": group})))
	wantErr := fmt.Sprintf(`controller config refused: agents.named[1] {group %q} (account %q) maps uid %d, which agents.named[0] {name "bee", account %q} already maps: a uid may match one entry only`,
		group, b.Name, b.UID, b.Name)
	if err == nil || err.Error() != wantErr {
		t.Fatalf("a member also named:\n got %v\nwant %s", err, wantErr)
	}
}
