package installer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// accountRoot writes passwd and group files under a scratch root.
func accountRoot(t *testing.T, passwd, group string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/group"), []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func findingsByName(fs []finding) map[string]finding {
	m := map[string]finding{}
	for _, f := range fs {
		m[f.Name] = f
	}
	return m
}

func TestCheckAccounts(t *testing.T) {
	const group = "root:x:0:\nsteward-agents:x:990:\nsteward-approvers:x:989:\nsteward-operator:x:991:\nsteward-controller:x:992:\nusers:x:100:\n"
	good := "root:x:0:0:root:/root:/bin/bash\n" +
		"steward-operator:x:991:991:steward operator (host):/var/lib/steward-operator:/usr/sbin/nologin\n" +
		"steward-controller:x:992:992:steward controller:/var/lib/steward-controller:/usr/sbin/nologin\n"
	db, err := readAccountDB(accountRoot(t, good, group))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range checkAccounts(db) {
		if f.State != stateOK {
			t.Errorf("%s %s: %s %s", f.Kind, f.Name, f.State, f.Detail)
		}
	}

	cases := []struct {
		name, passwd, group, who, want string
	}{
		{"login shell", strings.Replace(good, "/var/lib/steward-operator:/usr/sbin/nologin", "/var/lib/steward-operator:/bin/sh", 1), group,
			"steward-operator", "login shell /bin/sh, want none (nologin)"},
		{"home", strings.Replace(good, "/var/lib/steward-controller:", "/home/sc:", 1), group,
			"steward-controller", "home /home/sc, want /var/lib/steward-controller"},
		{"not a system uid", strings.Replace(good, "steward-operator:x:991:991", "steward-operator:x:1991:991", 1), group,
			"steward-operator", "uid 1991 is not a system uid (at most 999)"},
		{"shared primary group", strings.Replace(good, "steward-operator:x:991:991", "steward-operator:x:991:100", 1), group,
			"steward-operator", "primary group is gid 100 (users), want its own group steward-operator"},
		{"agents not a system group", good, strings.Replace(group, "steward-agents:x:990:", "steward-agents:x:1990:", 1),
			"steward-agents", "gid 1990 is not a system gid (at most 999)"},
		{"approvers not a system group", good, strings.Replace(group, "steward-approvers:x:989:", "steward-approvers:x:1989:", 1),
			"steward-approvers", "gid 1989 is not a system gid (at most 999)"},
		{"user group left over", "root:x:0:0:root:/root:/bin/bash\n", strings.Replace(group, "steward-operator:x:991:", "steward-operator:x:1500:", 1),
			"steward-operator", "no such user, but group steward-operator exists with non-system gid 1500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, err := readAccountDB(accountRoot(t, c.passwd, c.group))
			if err != nil {
				t.Fatal(err)
			}
			f := findingsByName(checkAccounts(db))[c.who]
			if f.State != stateDiffers || f.Detail != c.want {
				t.Fatalf("%s: %s %q, want differs %q", c.who, f.State, f.Detail, c.want)
			}
		})
	}

	db, _ = readAccountDB(accountRoot(t, "root:x:0:0:root:/root:/bin/bash\n", "root:x:0:\n"))
	for _, f := range checkAccounts(db) {
		if f.State != stateMissing {
			t.Errorf("on a machine without them, %s %s is %s", f.Kind, f.Name, f.State)
		}
	}
}

func TestReadAccountDBRefusesMalformed(t *testing.T) {
	for _, c := range []struct{ passwd, group, want string }{
		{"root:x:0:0:root:/root\n", "root:x:0:\n", "passwd:1: 6 fields, want 7"},
		{"root:x:zero:0:root:/root:/bin/sh\n", "root:x:0:\n", `passwd:1: user "root": bad uid or gid`},
		{"root:x:0:0:root:/root:/bin/sh\n", "root:x:0\n", "group:1: 3 fields, want 4"},
		{"root:x:0:0:root:/root:/bin/sh\n", "# comment\n\nroot:x:-1:\n", `group:3: group "root": bad gid`},
	} {
		_, err := readAccountDB(accountRoot(t, c.passwd, c.group))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("passwd %q group %q: %v, want %q", c.passwd, c.group, err, c.want)
		}
	}
}

func TestCheckSudoersRefusesBrokenDropIn(t *testing.T) {
	needVisudo(t)
	err := checkSudoers(t.Context(), []byte("steward-operator ALL=(root) NOPASSWD /bin/sh\n"))
	if err == nil || !strings.Contains(err.Error(), "the sudoers drop-in does not pass visudo") {
		t.Fatalf("broken drop-in: %v", err)
	}
	if err := checkSudoers(t.Context(), renderSudoers("/usr/local/bin")); err != nil {
		t.Fatalf("rendered drop-in: %v", err)
	}
}
