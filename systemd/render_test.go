package systemd

import (
	"bufio"
	"bytes"
	"errors"
	"github.com/stewardrt/steward/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// placeholderBinDir makes a BinDir holding steward-operator and
// steward-controller. They are copies of /bin/true, only so that
// `systemd-analyze verify` finds an executable at each ExecStart path (it
// refuses a unit whose binary does not exist); nothing runs them.
func placeholderBinDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tr, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"steward-operator", "steward-controller"} {
		if err := os.WriteFile(filepath.Join(dir, name), tr, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// renderTree renders with p and writes the files under a fresh root.
func renderTree(t *testing.T, p UnitParams) (root string, files map[string][]byte) {
	t.Helper()
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	for rel, b := range files {
		full := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, files
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Missing(t, "%s is not installed (.ci/run installs package systemd): %v", name, err)
	}
	return p
}

func unitPaths(root string, files map[string][]byte, suffix string) []string {
	var out []string
	for rel := range files {
		if strings.HasPrefix(rel, UnitDir+"/") && strings.HasSuffix(rel, suffix) {
			out = append(out, filepath.Join(root, rel))
		}
	}
	sort.Strings(out)
	return out
}

func TestRenderFileSet(t *testing.T) {
	files, err := Render(UnitParams{BinDir: "/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rel := range files {
		got = append(got, rel)
	}
	sort.Strings(got)
	want := []string{
		"etc/systemd/system/steward-controller-foreground.socket",
		"etc/systemd/system/steward-controller-mcp.socket",
		"etc/systemd/system/steward-controller.service",
		"etc/systemd/system/steward-operator.service",
		"etc/sysusers.d/steward.conf",
		"etc/tmpfiles.d/steward.conf",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rendered files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	again, err := Render(UnitParams{BinDir: "/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	for rel, b := range files {
		if !bytes.Equal(b, again[rel]) {
			t.Errorf("%s: two renders with the same parameters differ", rel)
		}
	}
}

// directives parses a unit file into key → values (repeated keys append).
func directives(t *testing.T, b []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' || l[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("line %q is not KEY=VALUE", l)
		}
		out[k] = append(out[k], v)
	}
	return out
}

func TestRenderServices(t *testing.T) {
	files, err := Render(UnitParams{BinDir: "/opt/steward/bin"})
	if err != nil {
		t.Fatal(err)
	}
	op := directives(t, files[UnitDir+"/"+OperatorService])
	ct := directives(t, files[UnitDir+"/"+ControllerService])

	exact := func(name string, d map[string][]string, key string, want ...string) {
		t.Helper()
		if strings.Join(d[key], "|") != strings.Join(want, "|") {
			t.Errorf("%s: %s=%q, want %q", name, key, d[key], want)
		}
	}
	exact("operator", op, "ExecStart", "/opt/steward/bin/steward-operator serve --store /var/lib/steward-operator/store --approvals-socket /run/steward/approvals/approvals.sock --approvers-group steward-approvers")
	exact("controller", ct, "ExecStart", "/opt/steward/bin/steward-controller serve --config /var/lib/steward-controller/config.json")
	exact("operator", op, "User", OperatorUser)
	exact("controller", ct, "User", ControllerUser)
	exact("operator", op, "StateDirectory", "steward-operator")
	exact("controller", ct, "StateDirectory", "steward-controller")
	exact("operator", op, "ReadWritePaths", HostRuntimeDir+" "+ApprovalsRuntimeDir)
	exact("operator", op, "PrivateNetwork", "yes")
	exact("controller", ct, "PrivateNetwork")
	exact("controller", ct, "Sockets", ControllerForegroundSocket+" "+ControllerMCPSocket)
	exact("controller", ct, "ReadWritePaths", ControllerRuntimeDir)

	// Every setting DESIGN.md section 10 names, in both services.
	common := [][]string{
		{"Type", "notify"}, {"NotifyAccess", "main"}, {"WatchdogSec", "30s"},
		{"UMask", "0077"}, {"StateDirectoryMode", "0700"},
		{"NoNewPrivileges", "yes"}, {"ProtectSystem", "strict"}, {"ProtectHome", "yes"},
		{"PrivateTmp", "yes"}, {"PrivateDevices", "yes"}, {"CapabilityBoundingSet", ""},
		{"RestrictAddressFamilies", "AF_UNIX"},
		{"SystemCallFilter", "@system-service", "~@privileged @resources"},
		{"SystemCallArchitectures", "native"}, {"MemoryDenyWriteExecute", "yes"},
		{"RestrictNamespaces", "yes"}, {"RestrictSUIDSGID", "yes"},
		{"LockPersonality", "yes"}, {"RemoveIPC", "yes"},
		{"PrivateUsers"}, // absent: it would hide the peer UIDs the sockets check
		{"DynamicUser"},  // absent: the accounts are static
	}
	for _, c := range common {
		exact("operator", op, c[0], c[1:]...)
		exact("controller", ct, c[0], c[1:]...)
	}
}

func TestRenderSockets(t *testing.T) {
	files, err := Render(UnitParams{BinDir: "/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Sockets() {
		d := directives(t, files[UnitDir+"/"+s.Unit])
		want := map[string]string{
			"ListenStream":       s.Path,
			"FileDescriptorName": s.FDName,
			"Service":            ControllerService,
			"SocketUser":         s.User,
			"SocketGroup":        s.Group,
			"SocketMode":         "0" + strconv.FormatUint(uint64(s.Mode), 8),
		}
		for k, v := range want {
			if len(d[k]) != 1 || d[k][0] != v {
				t.Errorf("%s: %s=%q, want %q", s.Unit, k, d[k], v)
			}
		}
	}
}

func TestRenderRefusesParams(t *testing.T) {
	cases := []struct {
		name string
		p    UnitParams
		want string
	}{
		{"empty bin dir", UnitParams{}, "BinDir is empty"},
		{"relative bin dir", UnitParams{BinDir: "bin"}, `BinDir "bin" is not a clean absolute path`},
		{"unclean bin dir", UnitParams{BinDir: "/usr/../bin"}, "not a clean absolute path"},
		{"root bin dir", UnitParams{BinDir: "/"}, "not a clean absolute path"},
		{"space", UnitParams{BinDir: "/opt/my bin"}, `has character ' '`},
		{"specifier", UnitParams{BinDir: "/opt/%h"}, `has character '%'`},
		{"variable", UnitParams{BinDir: "/opt/$HOME"}, `has character '$'`},
		{"newline", UnitParams{BinDir: "/opt/x\nExecStartPre=/bin/sh"}, `has character '\n'`},
		{"store outside state", UnitParams{BinDir: "/usr/bin", OperatorStore: "/srv/store"}, "is not inside /var/lib/steward-operator"},
		{"store is state dir prefix", UnitParams{BinDir: "/usr/bin", OperatorStore: "/var/lib/steward-operatorX/s"}, "is not inside"},
		{"config outside state", UnitParams{BinDir: "/usr/bin", ControllerConfig: "/etc/steward.json"}, "is not inside /var/lib/steward-controller"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, err := Render(c.p)
			if !errors.Is(err, ErrParams) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Render(%+v) = %v, want ErrParams containing %q", c.p, err, c.want)
			}
			if files != nil {
				t.Fatalf("Render returned files with an error")
			}
		})
	}
}

// TestUnitsVerify runs the machine's own systemd over every rendered unit.
// Any output at all (systemd-analyze only warns about an unknown key) fails.
func TestUnitsVerify(t *testing.T) {
	analyze := needTool(t, "systemd-analyze")
	root, files := renderTree(t, UnitParams{BinDir: placeholderBinDir(t)})
	units := unitPaths(root, files, "")
	if len(units) != 4 {
		t.Fatalf("%d units rendered, want 4", len(units))
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitsVerifyCatchesMissingBinary shows the check above has teeth: a
// BinDir without the binaries fails verification.
func TestUnitsVerifyCatchesMissingBinary(t *testing.T) {
	analyze := needTool(t, "systemd-analyze")
	root, files := renderTree(t, UnitParams{BinDir: filepath.Join(t.TempDir(), "absent")})
	out, err := exec.Command(analyze, append([]string{"verify"}, unitPaths(root, files, ".service")...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not executable") {
		t.Fatalf("verify with missing binaries: err=%v\n%s", err, out)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9]+\.[0-9]+)`)

// TestServicesSecurityExposure requires each service to rate 1.0 or lower
// with `systemd-analyze security --offline=yes`, twice over: its exit status
// with --threshold=10 (the threshold counts tenths) and the printed level.
func TestServicesSecurityExposure(t *testing.T) {
	analyze := needTool(t, "systemd-analyze")
	root, files := renderTree(t, UnitParams{BinDir: placeholderBinDir(t)})
	services := unitPaths(root, files, ".service")
	if len(services) != 2 {
		t.Fatalf("%d services rendered, want 2", len(services))
	}
	for _, svc := range services {
		out, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=10", "--no-pager", svc).CombinedOutput()
		if err != nil {
			t.Errorf("%s: systemd-analyze security: %v\n%s", svc, err, out)
			continue
		}
		m := exposureRE.FindStringSubmatch(string(out))
		if m == nil {
			t.Errorf("%s: no overall exposure level in:\n%s", svc, out)
			continue
		}
		level, err := strconv.ParseFloat(m[2], 64)
		if err != nil || level > 1.0 {
			t.Errorf("%s: exposure level %s, want 1.0 or lower\n%s", m[1], m[2], out)
		}
		t.Logf("%s: exposure %s", m[1], m[2])
	}
}

// TestSysusersAndTmpfiles applies the rendered sysusers.d and tmpfiles.d
// files with the machine's own systemd-sysusers and systemd-tmpfiles in a
// scratch root, and checks the accounts, owners and modes they produce
// against Dirs.
func TestSysusersAndTmpfiles(t *testing.T) {
	sysusers := needTool(t, "systemd-sysusers")
	tmpfiles := needTool(t, "systemd-tmpfiles")
	testenv.NeedRoot(t, "for systemd-tmpfiles to chown the directories it creates")
	root, _ := renderTree(t, UnitParams{BinDir: "/usr/bin"})
	if out, err := exec.Command(sysusers, "--root="+root, filepath.Join(root, SysusersFile)).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]uint32{"root": 0}
	gids := map[string]uint32{"root": 0}
	for _, l := range strings.Split(strings.TrimSpace(string(passwd)), "\n") {
		f := strings.Split(l, ":")
		uid, _ := strconv.ParseUint(f[2], 10, 32)
		uids[f[0]] = uint32(uid)
		wantHome := map[string]string{OperatorUser: OperatorStateDir, ControllerUser: ControllerStateDir}[f[0]]
		if f[5] != wantHome || !strings.HasSuffix(f[6], "nologin") || f[2] != f[3] || uid >= 1000 {
			t.Errorf("passwd line %q: want a system account, home %s, its own primary group, nologin", l, wantHome)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(string(group)), "\n") {
		f := strings.Split(l, ":")
		gid, _ := strconv.ParseUint(f[2], 10, 32)
		gids[f[0]] = uint32(gid)
	}
	for _, name := range []string{OperatorUser, ControllerUser} {
		if _, ok := uids[name]; !ok {
			t.Errorf("account %s not created", name)
		}
	}
	for _, g := range Groups() {
		if _, ok := gids[g]; !ok {
			t.Errorf("group %s not created", g)
		}
	}

	if out, err := exec.Command(tmpfiles, "--root="+root, "--create", filepath.Join(root, TmpfilesFile)).CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	for _, d := range Dirs() {
		if !d.Runtime {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(root, d.Path), &st); err != nil {
			t.Errorf("%s: %v", d.Path, err)
			continue
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Mode&0o7777 != d.Mode || st.Uid != uids[d.User] || st.Gid != gids[d.Group] {
			t.Errorf("%s: mode %o uid %d gid %d, want dir %o %s(%d):%s(%d)",
				d.Path, st.Mode, st.Uid, st.Gid, d.Mode, d.User, uids[d.User], d.Group, gids[d.Group])
		}
	}
}

func BenchmarkRender(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Render(UnitParams{BinDir: "/usr/bin"}); err != nil {
			b.Fatal(err)
		}
	}
}
