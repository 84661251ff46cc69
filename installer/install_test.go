package installer

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/systemd"
)

func needVisudo(t *testing.T) {
	t.Helper()
	if _, err := findTool("visudo", "sudo"); err != nil {
		testenv.Missing(t, "install checks the sudoers drop-in with visudo: %v (.ci/run installs sudo)", err)
	}
}

// treeEnv is the Env of a root-tree install; the bin dir comes from
// --bin-dir, so Executable does not matter.
func treeEnv() Env { return Env{EUID: os.Geteuid(), Executable: "/nonexistent/steward-installer"} }

const treeBin = "/opt/steward/bin"

func installTree(t *testing.T) string {
	t.Helper()
	needVisudo(t)
	root := t.TempDir()
	code, out, errs := run(t, treeEnv(), "install", "--root", root, "--bin-dir", treeBin)
	if code != ExitOK || errs != "" {
		t.Fatalf("install --root: exit %d\n%s%s", code, out, errs)
	}
	return root
}

func modeOf(t *testing.T, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

func TestInstallRootTreeTwice(t *testing.T) {
	root := installTree(t)
	files, err := managedFiles(treeBin)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 7 {
		t.Fatalf("%d managed files, want 7 (4 units, sysusers, tmpfiles, sudoers)", len(files))
	}
	for _, m := range files {
		got, err := os.ReadFile(filepath.Join(root, m.rel))
		if err != nil || string(got) != string(m.data) {
			t.Errorf("%s: content differs from the rendering (%v)", m.rel, err)
		}
		if mode := modeOf(t, filepath.Join(root, m.rel)); mode != m.mode {
			t.Errorf("%s: mode %04o, want %04o", m.rel, mode, m.mode)
		}
	}
	for _, d := range systemd.Dirs() {
		if mode := modeOf(t, filepath.Join(root, d.Path)); mode != d.Mode {
			t.Errorf("%s: mode %04o, want %04o", d.Path, mode, d.Mode)
		}
	}
	sudoers, _ := os.ReadFile(filepath.Join(root, SudoersFile))
	for _, want := range []string{
		treeBin + "/steward-installer status, \\\n",
		treeBin + "/steward-installer status --json, \\\n",
		treeBin + "/steward-installer controller-journal, \\\n",
		"steward-operator ALL=(root) NOPASSWD: STEWARD_OPERATOR_VERBS\n",
	} {
		if !strings.Contains(string(sudoers), want) {
			t.Errorf("sudoers drop-in lacks %q:\n%s", want, sudoers)
		}
	}
	var rules strings.Builder
	for _, l := range strings.Split(string(sudoers), "\n") {
		if !strings.HasPrefix(l, "#") {
			rules.WriteString(l + "\n")
		}
	}
	for _, never := range []string{"steward-installer install", "steward-installer uninstall", "ALL=(ALL)", "NOPASSWD: ALL", "--root", "--bin-dir"} {
		if strings.Contains(rules.String(), never) {
			t.Errorf("sudoers drop-in grants %q:\n%s", never, sudoers)
		}
	}

	// Again: nothing changes.
	before := snapshot(t, root)
	code, out, errs := run(t, treeEnv(), "install", "--root", root, "--bin-dir", treeBin)
	if code != ExitOK || errs != "" || strings.Contains(out, "created ") ||
		!strings.Contains(out, "install: done in "+root+", 0 created, 13 already in place") {
		t.Fatalf("second install: exit %d\n%s%s", code, out, errs)
	}
	if after := snapshot(t, root); after != before {
		t.Fatalf("the second install changed the tree:\n%s\nwas:\n%s", after, before)
	}

	code, out, errs = run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin)
	if code != ExitOK || !strings.HasSuffix(out, "status: installed in "+root+"\n") || errs != "" {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin, "--json")
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitOK || !rep.Installed || rep.Root != root || rep.BinDir != treeBin {
		t.Fatalf("status --json: exit %d, %v, %+v", code, err, rep)
	}
	// 6 dirs, 8 files, 3 controller sockets and the host's approvals
	// socket (absent: nothing listens), and no bundle (so no route
	// selected).
	if len(rep.Findings) != 18 || rep.Findings[17].Kind != "route" || rep.Findings[17].State != stateUnknown {
		t.Fatalf("status --json: %d findings, want 18: %+v", len(rep.Findings), rep.Findings)
	}
}

// snapshot lists every path under root with its mode, size and mtime.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.TrimPrefix(p, root) + " " + fi.Mode().String() + " " +
			fi.ModTime().String() + "\n")
		return nil
	})
	return b.String()
}

func TestInstallRefusesDifferences(t *testing.T) {
	root := installTree(t)
	unit := filepath.Join(root, systemd.UnitDir, systemd.OperatorService)
	data, _ := os.ReadFile(unit)
	edited := strings.Replace(string(data), "WatchdogSec=30s", "WatchdogSec=0", 1)
	if err := os.WriteFile(unit, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, systemd.HostRuntimeDir), 0o755); err != nil {
		t.Fatal(err)
	}
	sysusers := filepath.Join(root, systemd.SysusersFile)
	if err := os.Chmod(sysusers, 0o600); err != nil {
		t.Fatal(err)
	}
	// Missing files are what install would create, were it not refusing.
	if err := os.Remove(filepath.Join(root, SudoersFile)); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)

	code, out, errs := run(t, treeEnv(), "install", "--root", root, "--bin-dir", treeBin)
	if code != ExitFail || out != "" {
		t.Fatalf("install over differences: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"refused: file " + unit + " differs from what install makes: content: line ",
		`is "WatchdogSec=0", want "WatchdogSec=30s"`,
		"refused: dir " + filepath.Join(root, systemd.HostRuntimeDir) + " differs from what install makes: mode 0755, want 2750",
		"refused: file " + sysusers + " differs from what install makes: mode 0600, want 0644",
		"3 difference(s); nothing was changed",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if after := snapshot(t, root); after != before {
		t.Fatalf("a refused install changed the tree:\n%s\nwas:\n%s", after, before)
	}

	code, out, _ = run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin)
	if code != ExitFail || !strings.Contains(out, "status: not installed correctly in "+root+": 1 missing, 3 differ") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	// A different bin dir renders different units: that is a difference too.
	code, _, errs = run(t, treeEnv(), "status", "--root", root, "--bin-dir", "/usr/local/bin")
	if code != ExitFail {
		t.Fatalf("status with another bin dir: exit %d %s", code, errs)
	}
}

// TestInstallFollowsNoLink: a link planted in the tree must not lead the
// installer out of it.
func TestInstallFollowsNoLink(t *testing.T) {
	needVisudo(t)
	root, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, treeEnv(), "install", "--root", root, "--bin-dir", treeBin)
	if code != ExitFail || out != "" || !strings.Contains(errs, filepath.Join(root, "etc")+": not a directory, or a symbolic link") {
		t.Fatalf("install through a link: exit %d\n%s%s", code, out, errs)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Fatalf("install wrote through the link: %v", entries)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Fatalf("a refused install created %v", entries)
	}
}

func TestUninstallRootTree(t *testing.T) {
	root := installTree(t)
	store := filepath.Join(root, systemd.DefaultOperatorStore)
	if err := os.WriteFile(store, []byte("journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	route := filepath.Join(root, systemd.HostRuntimeDir, "r1.sock")
	if err := os.WriteFile(route, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errs := run(t, treeEnv(), "uninstall", "--root", root)
	if code != ExitOK || errs != "" {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "removed file "+filepath.Join(root, SudoersFile) {
		t.Errorf("uninstall removed %q first, want the sudoers drop-in", lines[0])
	}
	for _, m := range managedPaths() {
		if _, err := os.Lstat(filepath.Join(root, m)); !os.IsNotExist(err) {
			t.Errorf("%s survived uninstall: %v", m, err)
		}
	}
	for _, d := range systemd.Dirs() {
		_, err := os.Lstat(filepath.Join(root, d.Path))
		if d.Runtime && !os.IsNotExist(err) {
			t.Errorf("runtime dir %s survived uninstall: %v", d.Path, err)
		}
		if !d.Runtime && err != nil {
			t.Errorf("state dir %s removed without --purge: %v", d.Path, err)
		}
	}
	if got, err := os.ReadFile(store); err != nil || string(got) != "journal" {
		t.Fatalf("the store did not survive uninstall: %q, %v", got, err)
	}

	code, out, errs = run(t, treeEnv(), "uninstall", "--root", root, "--purge")
	if code != ExitOK || errs != "" || !strings.Contains(out, "removed dir "+filepath.Join(root, systemd.OperatorStateDir)) {
		t.Fatalf("uninstall --purge: exit %d\n%s%s", code, out, errs)
	}
	for _, d := range systemd.Dirs() {
		if _, err := os.Lstat(filepath.Join(root, d.Path)); !os.IsNotExist(err) {
			t.Errorf("%s survived uninstall --purge: %v", d.Path, err)
		}
	}
	code, out, errs = run(t, treeEnv(), "uninstall", "--root", root, "--purge")
	if code != ExitOK || errs != "" || strings.Contains(out, "removed") {
		t.Fatalf("uninstall of nothing: exit %d\n%s%s", code, out, errs)
	}
}

// listenAt makes a real listening socket at path with mode.
func listenAt(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestStatusSockets(t *testing.T) {
	root := installTree(t)
	for _, s := range systemd.Sockets() {
		listenAt(t, filepath.Join(root, s.Path), os.FileMode(s.Mode))
	}
	listenAt(t, filepath.Join(root, systemd.ReverseSocketPath), systemd.ReverseSocketMode)
	listenAt(t, filepath.Join(root, systemd.ApprovalsSocketPath), systemd.ApprovalsSocketMode)
	listenAt(t, filepath.Join(root, systemd.HostRuntimeDir, "r1.sock"), 0o660)
	code, out, errs := run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin)
	if code != ExitOK || strings.Contains(out, "absent") || !strings.Contains(out, "socket  ok      "+filepath.Join(root, systemd.HostRuntimeDir, "r1.sock")) {
		t.Fatalf("status with sockets: exit %d\n%s%s", code, out, errs)
	}

	if err := os.Chmod(filepath.Join(root, systemd.MCPSocketPath), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, systemd.ApprovalsSocketPath), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, systemd.HostRuntimeDir, "r2.sock"), nil, 0o660); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, treeEnv(), "status", "--root", root, "--bin-dir", treeBin)
	for _, want := range []string{
		"socket  differs " + filepath.Join(root, systemd.MCPSocketPath) + ": mode 0666, want 0660",
		"socket  differs " + filepath.Join(root, systemd.ApprovalsSocketPath) + ": mode 0666, want 0660",
		"socket  differs " + filepath.Join(root, systemd.HostRuntimeDir, "r2.sock") + ": a regular file, want a socket",
		"0 missing, 3 differ",
	} {
		if code != ExitFail || !strings.Contains(out, want) {
			t.Errorf("status: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

func TestParseShowAndReadiness(t *testing.T) {
	u, err := parseShow([]byte("ActiveState=active\nSubState=running\nStatusText=serving 2 routes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f := readiness("steward-operator.service", u); f.State != stateOK || f.Detail != "ready (active/running): serving 2 routes" {
		t.Errorf("active: %+v", f)
	}
	u, _ = parseShow([]byte("ActiveState=activating\nSubState=start\nStatusText=\n"))
	if f := readiness("x", u); f.State != stateDown || !strings.Contains(f.Detail, "READY=1 not sent yet") {
		t.Errorf("activating: %+v", f)
	}
	u, _ = parseShow([]byte("ActiveState=failed\nSubState=failed\n"))
	if f := readiness("x", u); f.State != stateDown || f.Detail != "failed/failed" {
		t.Errorf("failed: %+v", f)
	}
	for _, bad := range []string{"", "SubState=running\n", "ActiveState=active\n", "garbage\n"} {
		if _, err := parseShow([]byte(bad)); err == nil {
			t.Errorf("parseShow(%q) accepted", bad)
		}
	}
}
