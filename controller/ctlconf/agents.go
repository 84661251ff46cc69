package ctlconf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// MaxAgentName bounds an agent's name (P1.6: 1 to 32 of [a-z0-9_-],
// starting with a letter), which is also useradd's limit on an account
// name, so that a group's members can be agents named after their account.
const MaxAgentName = 32

// MaxNamedAgents bounds the entries of agents.named. A group entry may
// expand to more agents than that; the number of agents is bounded by the
// account database, not here.
const MaxNamedAgents = 256

// Agents is who may use the MCP socket, and under which name. A peer
// whose SO_PEERCRED uid a named entry maps is that agent; otherwise a peer
// whose uid is in UIDs, or whose gid is in GIDs, is admitted as the
// principal "uid:N" (the allow-list before agents had names). Nothing an
// agent writes names it: only the kernel's uid does.
type Agents struct {
	UIDs  []uint32     `json:"uids"`
	GIDs  []uint32     `json:"gids"`
	Named []AgentEntry `json:"named,omitempty"`
}

// AgentEntry is one entry of agents.named: either {name, account}, the
// agent name of that account's uid, or {group}, each member of that group
// an agent named after its account.
type AgentEntry struct {
	Name    string `json:"name,omitempty"`
	Account string `json:"account,omitempty"`
	Group   string `json:"group,omitempty"`
}

// agentSource is where a uid's agent name came from: for the refusal of
// a uid that two entries match.
type agentSource struct {
	name  string
	entry string // "agents.named[1] {group \"devs\"} (account \"bob\")" and the like
}

// ValidateAgentName checks an agent's name: 1 to MaxAgentName of
// [a-z0-9_-], starting with a letter, and not "foreground" (the principal
// of the foreground socket). Names have no ':', so none is ever "uid:N".
func ValidateAgentName(s string) error {
	if s == "" || len(s) > MaxAgentName {
		return fmt.Errorf("agent name %q must be 1 to %d bytes", s, MaxAgentName)
	}
	if s[0] < 'a' || s[0] > 'z' {
		return fmt.Errorf("agent name %q must start with a letter a-z", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("agent name %q has byte %q at offset %d, not one of a-z0-9_-", s, c, i)
		}
	}
	if s == PrincipalForeground {
		return fmt.Errorf("agent name %q is reserved for the foreground socket", s)
	}
	return nil
}

// resolveAgents checks agents.named and maps each uid it names to its
// agent, resolving accounts and groups in the system's account database
// (os/user; a group's members are its member list and the accounts whose
// primary group it is). A uid that two entries match (two named entries,
// or a named entry and agents.uids or, through the account's primary
// group, agents.gids), two entries giving one name, an account or group
// that does not exist, and a member whose account name is not an agent
// name are refused, naming the entries.
func (a *Agents) resolveAgents() (map[uint32]string, error) {
	if n := len(a.Named); n > MaxNamedAgents {
		return nil, fmt.Errorf("agents.named: %d entries exceeds the bound of %d", n, MaxNamedAgents)
	}
	byUID := map[uint32]agentSource{}
	byName := map[string]string{} // agent name -> entry
	add := func(uid uint32, gid uint32, src agentSource) error {
		if prev, ok := byUID[uid]; ok {
			return fmt.Errorf("%s maps uid %d, which %s already maps: a uid may match one entry only", src.entry, uid, prev.entry)
		}
		if prev, ok := byName[src.name]; ok {
			return fmt.Errorf("%s names agent %q, as %s does: agent names must differ", src.entry, src.name, prev)
		}
		if slices.Contains(a.UIDs, uid) {
			return fmt.Errorf("%s maps uid %d, which agents.uids also admits: a uid may match one entry only", src.entry, uid)
		}
		if slices.Contains(a.GIDs, gid) {
			return fmt.Errorf("%s maps uid %d, whose primary gid %d agents.gids also admits: a uid may match one entry only", src.entry, uid, gid)
		}
		byUID[uid], byName[src.name] = src, src.entry
		return nil
	}
	for i, e := range a.Named {
		field := "agents.named[" + strconv.Itoa(i) + "]"
		switch {
		case e.Group != "" && (e.Name != "" || e.Account != ""):
			return nil, fmt.Errorf("%s: an entry is {name, account} or {group}, not both", field)
		case e.Group != "":
			members, err := groupMembers(e.Group)
			if err != nil {
				return nil, fmt.Errorf("%s {group %q}: %w", field, e.Group, err)
			}
			for _, m := range members {
				src := agentSource{name: m.name, entry: fmt.Sprintf("%s {group %q} (account %q)", field, e.Group, m.name)}
				if err := ValidateAgentName(m.name); err != nil {
					return nil, fmt.Errorf("%s: %w", src.entry, err)
				}
				if err := add(m.uid, m.gid, src); err != nil {
					return nil, err
				}
			}
		case e.Name == "" || e.Account == "":
			return nil, fmt.Errorf("%s: an entry is {name, account} or {group}: name and account are both required", field)
		default:
			src := agentSource{name: e.Name, entry: fmt.Sprintf("%s {name %q, account %q}", field, e.Name, e.Account)}
			if err := ValidateAgentName(e.Name); err != nil {
				return nil, fmt.Errorf("%s: %w", src.entry, err)
			}
			uid, gid, err := lookupAccount(e.Account)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src.entry, err)
			}
			if err := add(uid, gid, src); err != nil {
				return nil, err
			}
		}
	}
	out := make(map[uint32]string, len(byUID))
	for uid, src := range byUID {
		out[uid] = src.name
	}
	return out, nil
}

// lookupAccount resolves an account name to its uid and primary gid.
func lookupAccount(name string) (uid, gid uint32, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("account %q: %w", name, err)
	}
	return accountIDs(u)
}

func accountIDs(u *user.User) (uint32, uint32, error) {
	uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
	gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(uerr, gerr); err != nil {
		return 0, 0, fmt.Errorf("account %q: %w", u.Username, err)
	}
	return uint32(uid), uint32(gid), nil
}

type member struct {
	name     string
	uid, gid uint32
}

// The account database files a group's members are read from: os/user
// resolves names and ids but cannot list a group's members.
var (
	groupFile  = "/etc/group"
	passwdFile = "/etc/passwd"
)

// groupMembers lists the accounts of group (os/user.LookupGroup): those
// its /etc/group entry lists and those whose primary group it is in
// /etc/passwd, each resolved with os/user, sorted by name, once each.
func groupMembers(group string) ([]member, error) {
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	if err := scanDB(groupFile, func(f []string) {
		if len(f) >= 4 && f[0] == g.Name && f[3] != "" {
			for _, n := range strings.Split(f[3], ",") {
				names[n] = true
			}
		}
	}); err != nil {
		return nil, err
	}
	if err := scanDB(passwdFile, func(f []string) {
		if len(f) >= 4 && f[3] == g.Gid {
			names[f[0]] = true
		}
	}); err != nil {
		return nil, err
	}
	var out []member
	for n := range names {
		u, err := user.Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", n, err)
		}
		uid, gid, err := accountIDs(u)
		if err != nil {
			return nil, err
		}
		out = append(out, member{name: u.Username, uid: uid, gid: gid})
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// scanDB calls line with the ':'-separated fields of each entry of an
// account database file.
func scanDB(path string, line func([]string)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if t := sc.Text(); t != "" && t[0] != '#' {
			line(strings.Split(t, ":"))
		}
	}
	return sc.Err()
}

// AgentOf is the principal of an MCP peer with this uid and gid (from
// SO_PEERCRED): its agent name when a named entry maps the uid, else
// "uid:N" when agents.uids or agents.gids admits it; ok is false for a
// peer the config does not admit. Only a parsed config (Parse, Load) maps
// named agents.
func (c *Config) AgentOf(uid, gid uint32) (name string, ok bool) {
	if n, ok := c.agentNames[uid]; ok {
		return n, true
	}
	if slices.Contains(c.Agents.UIDs, uid) || slices.Contains(c.Agents.GIDs, gid) {
		return UIDPrincipal(uid), true
	}
	return "", false
}

// NamedAgentOf is the name of the named agent (agents.named) whose account
// has uid, and ok false when no named entry maps it: the legacy uids and
// gids admit a peer as "uid:N", which names no agent the operator's limits
// can name (an advisor is always a named agent).
func (c *Config) NamedAgentOf(uid uint32) (name string, ok bool) {
	name, ok = c.agentNames[uid]
	return name, ok
}

// AgentNames lists the named agents the config resolved, by uid.
func (c *Config) AgentNames() map[uint32]string {
	out := make(map[uint32]string, len(c.agentNames))
	for u, n := range c.agentNames {
		out[u] = n
	}
	return out
}
