package installer

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/systemd"
)

// realBinDir makes a root-owned bin dir holding this test binary as
// steward-installer (TestMain makes it behave as the real one) and copies of
// /bin/true as the daemons, only so that the installed units' ExecStart
// binaries exist for systemd-analyze verify.
func realBinDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, exe, filepath.Join(dir, "steward-installer"))
	copyFile(t, "/bin/true", filepath.Join(dir, "steward-operator"))
	copyFile(t, "/bin/true", filepath.Join(dir, "steward-controller"))
	return dir
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// runBin runs the installer binary as a child and returns its exit status
// and output.
func runBin(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	// A test binary built with -cover says this when sudo has cleared
	// GOCOVERDIR from its environment; it is not the installer speaking.
	errs := strings.ReplaceAll(errb.String(), "warning: GOCOVERDIR not set, no coverage data emitted\n", "")
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errs
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errs
	}
	t.Fatalf("%s %q: %v", name, args, err)
	return 0, "", ""
}

// rootFile writes data as a root-owned 0600 file in a fresh private
// directory of root's.
func rootFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// asOperator runs `sudo -n BIN args...` as the steward-operator account, the
// way the operator's commands will.
func asOperator(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	return runBin(t, "/usr/bin/sudo", append([]string{"-u", systemd.OperatorUser, "/usr/bin/sudo", "-n", bin}, args...)...)
}

// TestRealInstall installs for real (twice), checks accounts, owners,
// modes and units, lets the operator account run allowed verbs through sudo
// and be refused the others, uninstalls, reinstalls, and purges: in a
// private mount namespace (inPrivateRoot), so the accounts, /etc, /var/lib
// and /run it changes are its own.
func TestRealInstall(t *testing.T) {
	if !inPrivateRoot(t, 2) {
		return
	}
	bin := realBinDir(t)
	installer := filepath.Join(bin, "steward-installer")
	t.Cleanup(func() {
		code, out, errs := runBin(t, installer, "uninstall", "--purge")
		if code != 0 {
			t.Errorf("cleanup: uninstall --purge: exit %d\n%s%s", code, out, errs)
		}
	})

	code, out, errs := runBin(t, installer, "install")
	if code != 0 || errs != "" || !strings.Contains(out, "install: done in /, 17 created, 0 already in place") {
		t.Fatalf("install: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runBin(t, installer, "install")
	if code != 0 || errs != "" || strings.Contains(out, "created ") || !strings.Contains(out, "0 created, 17 already in place") {
		t.Fatalf("second install: exit %d\n%s%s", code, out, errs)
	}

	// Accounts, as the system (not our parser) sees them.
	ids := map[string]int{"root": 0}
	for _, name := range []string{systemd.OperatorUser, systemd.ControllerUser} {
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		g, err := user.LookupGroupId(u.Gid)
		if err != nil || g.Name != name || uid > systemIDMax {
			t.Fatalf("account %s: %+v, primary group %v %v", name, u, g, err)
		}
		ids[name] = uid
	}
	gids := map[string]int{"root": 0}
	for _, name := range append([]string{systemd.OperatorUser, systemd.ControllerUser}, systemd.Groups()...) {
		g, err := user.LookupGroup(name)
		if err != nil {
			t.Fatal(err)
		}
		gids[name], _ = strconv.Atoi(g.Gid)
	}
	for _, d := range systemd.Dirs() {
		var st syscall.Stat_t
		if err := syscall.Lstat(d.Path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != d.Mode || int(st.Uid) != ids[d.User] || int(st.Gid) != gids[d.Group] {
			t.Errorf("%s: mode %04o owner %d:%d, want %04o %s:%s", d.Path, st.Mode&0o7777, st.Uid, st.Gid, d.Mode, d.User, d.Group)
		}
	}
	if mode := modeOf(t, "/"+SudoersFile); mode != 0o440 {
		t.Errorf("sudoers drop-in mode %04o", mode)
	}
	hostCheckpoint(t, "installed: accounts, directories, units, sudoers drop-in")

	// The installed units pass the machine's own systemd.
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		units, _ := filepath.Glob("/" + systemd.UnitDir + "/steward-*")
		if out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput(); err != nil || len(out) != 0 || len(units) != 4 {
			t.Errorf("systemd-analyze verify %v: %v\n%s", units, err, out)
		}
	}

	// The private /run has no /run/systemd/system: the installer sees a
	// machine not booted with systemd and asks no systemctl anything.
	code, out, errs = runBin(t, installer, "status")
	if code != 0 || !strings.HasSuffix(out, "status: installed in /\n") || !strings.Contains(out, "systemd is not running here (no /run/systemd/system)") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}

	t.Run("sudo", func(t *testing.T) {
		code, out, errs := asOperator(t, installer, "status")
		if code != 0 || !strings.HasSuffix(out, "status: installed in /\n") {
			t.Errorf("operator: sudo status: exit %d\n%s%s", code, out, errs)
		}
		code, out, errs = asOperator(t, installer, "status", "--json")
		var rep statusReport
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.Installed {
			t.Errorf("operator: sudo status --json: exit %d %v\n%s%s", code, err, out, errs)
		}
		// Allowed by sudo: the operator installs a bundle, which lands as
		// the controller's file (the installer became steward-controller
		// to write it).
		opUser, err := user.Lookup(systemd.OperatorUser)
		if err != nil {
			t.Fatal(err)
		}
		opUID, _ := strconv.Atoi(opUser.Uid)
		bundle := makeBundle(t, "ctl")
		bundleFile := filepath.Join(t.TempDir(), "host.bundle")
		if err := os.WriteFile(bundleFile, bundle, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(bundleFile, opUID, -1); err != nil {
			t.Fatal(err)
		}
		// Root pins the host first; the pin is the controller's file.
		code, out, errs = runBin(t, installer, "controller-pin-host", rootFile(t, "pin.bundle", bundle))
		if code != 0 || errs != "" || !strings.HasPrefix(out, "controller-pin-host: pinned /var/lib/steward-controller/"+HostPinFile) {
			t.Errorf("root: controller-pin-host: exit %d\n%s%s", code, out, errs)
		}
		code, out, errs = asOperator(t, installer, "bundle-install", bundleFile)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "bundle-install: installed "+systemd.DefaultControllerBundle+": controller ctl") {
			t.Errorf("operator: sudo bundle-install: exit %d\n%s%s", code, out, errs)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(systemd.DefaultControllerBundle, &st); err != nil || int(st.Uid) != ids[systemd.ControllerUser] || st.Mode&0o7777 != 0o600 {
			t.Errorf("installed bundle: %v: owner %d mode %04o, want %s 0600", err, st.Uid, st.Mode&0o7777, systemd.ControllerUser)
		}
		if got, err := os.ReadFile(systemd.DefaultControllerBundle); err != nil || string(got) != string(bundle) {
			t.Errorf("installed bundle differs: %v", err)
		}
		code, out, errs = asOperator(t, installer, "bundle-install", bundleFile)
		if code != 0 || !strings.HasPrefix(out, "bundle-install: unchanged ") {
			t.Errorf("operator: sudo bundle-install again: exit %d\n%s%s", code, out, errs)
		}
		// status shows the host's control socket and the route the bundle
		// carried, neither running.
		code, out, errs = asOperator(t, installer, "status")
		if code != 0 || !strings.Contains(out, "control down    /run/steward/host/control-ctl.sock: the host's control socket for controller ctl: its live routes are the controller's applications; not running") ||
			!strings.Contains(out, "route   down    appliance: in the bundle as built: application appliance, revision 1, forward /run/steward/host/appliance.sock; not running") {
			t.Errorf("operator: sudo status with a bundle: exit %d\n%s%s", code, out, errs)
		}
		// Allowed by sudo, so it reaches the verb, which finds no journal:
		// the controller never ran.
		code, out, errs = asOperator(t, installer, "controller-journal", "--from", "5")
		if code != ExitFail || out != "" || !strings.HasPrefix(errs, "steward-installer controller-journal: the controller's journal: ") {
			t.Errorf("operator: sudo controller-journal --from 5: exit %d\n%s%s", code, out, errs)
		}
		// Not in the drop-in: sudo refuses before the installer runs.
		for _, args := range [][]string{
			{"install"},
			{"uninstall", "--purge"},
			{"status", "--root", "/tmp"},
			{"status", "--bin-dir", "/tmp"},
			{"status", "--json", "--root", "/"},
		} {
			code, out, errs := asOperator(t, installer, args...)
			if code == 0 || out != "" || !strings.HasPrefix(errs, "sudo: ") || strings.Contains(errs, "steward-installer") {
				t.Errorf("operator: sudo %q: exit %d\n%s%s; want sudo's refusal", args, code, out, errs)
			}
		}
		code, out, errs = runBin(t, "/usr/bin/sudo", "-u", systemd.OperatorUser, "/usr/bin/sudo", "-n", "/usr/bin/id")
		if code == 0 || !strings.HasPrefix(errs, "sudo: ") {
			t.Errorf("operator: sudo id: exit %d\n%s%s; want sudo's refusal", code, out, errs)
		}
	})

	// Uninstall without --purge keeps state and accounts, and revokes sudo.
	if err := os.WriteFile(systemd.DefaultOperatorStore, []byte("journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runBin(t, installer, "uninstall")
	if code != 0 || errs != "" {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	if _, err := user.Lookup(systemd.OperatorUser); err != nil {
		t.Errorf("uninstall without --purge removed the account: %v", err)
	}
	if b, err := os.ReadFile(systemd.DefaultOperatorStore); err != nil || string(b) != "journal" {
		t.Errorf("uninstall without --purge lost the store: %q %v", b, err)
	}
	hostCheckpoint(t, "uninstalled without --purge: accounts and state kept")
	if code, _, errs := asOperator(t, installer, "status"); code == 0 || !strings.HasPrefix(errs, "sudo: ") {
		t.Errorf("operator still runs status through sudo after uninstall: exit %d %s", code, errs)
	}
	code, out, _ = runBin(t, installer, "status")
	if code != ExitFail || !strings.Contains(out, "file    missing /"+SudoersFile) {
		t.Errorf("status after uninstall: exit %d\n%s", code, out)
	}

	// Reinstall over the kept accounts and state.
	code, out, errs = runBin(t, installer, "install")
	if code != 0 || !strings.Contains(out, "unchanged account "+systemd.OperatorUser) ||
		!strings.Contains(out, "unchanged dir "+systemd.OperatorStateDir) || !strings.Contains(out, "created file /"+SudoersFile) {
		t.Fatalf("reinstall: exit %d\n%s%s", code, out, errs)
	}

	code, out, errs = runBin(t, installer, "uninstall", "--purge")
	if code != 0 || errs != "" {
		t.Fatalf("uninstall --purge: exit %d\n%s%s", code, out, errs)
	}
	for _, name := range []string{systemd.OperatorUser, systemd.ControllerUser} {
		if _, err := user.Lookup(name); err == nil {
			t.Errorf("account %s survived --purge", name)
		}
	}
	for _, g := range append(systemd.Groups(), systemd.OperatorUser, systemd.ControllerUser) {
		if _, err := user.LookupGroup(g); err == nil {
			t.Errorf("group %s survived --purge", g)
		}
	}
	for _, p := range append(managedPaths(), rel(systemd.RuntimeDir), rel(systemd.OperatorStateDir), rel(systemd.ControllerStateDir)) {
		if _, err := os.Lstat("/" + p); err == nil {
			t.Errorf("/%s survived --purge", p)
		}
	}
}

// TestRealInstallRefusesForeignAccount: an account by steward's name that
// install would not have made (here: one with a login shell) is refused,
// and nothing is installed.
func TestRealInstallRefusesForeignAccount(t *testing.T) {
	if !inPrivateRoot(t, 1) {
		return
	}
	bin := realBinDir(t)
	useradd, _ := findTool("useradd", "passwd")
	if out, err := exec.Command(useradd, "--system", "--user-group", "--no-create-home",
		"--home-dir", systemd.OperatorStateDir, "--shell", "/bin/bash", systemd.OperatorUser).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v\n%s", err, out)
	}
	hostCheckpoint(t, "account "+systemd.OperatorUser+" made by useradd")
	t.Cleanup(func() {
		userdel, _ := findTool("userdel", "passwd")
		if out, err := exec.Command(userdel, systemd.OperatorUser).CombinedOutput(); err != nil {
			t.Errorf("userdel: %v\n%s", err, out)
		}
	})
	code, out, errs := runBin(t, filepath.Join(bin, "steward-installer"), "install")
	want := "refused: account steward-operator differs from what install makes: login shell /bin/bash, want none (nologin)"
	if code != ExitFail || out != "" || !strings.Contains(errs, want) || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("install over a foreign account: exit %d\n%s%s", code, out, errs)
	}
	for _, p := range append(managedPaths(), rel(systemd.RuntimeDir)) {
		if _, err := os.Lstat("/" + p); err == nil {
			t.Errorf("/%s was created by a refused install", p)
		}
	}
	if _, err := user.Lookup(systemd.ControllerUser); err == nil {
		t.Errorf("a refused install created %s", systemd.ControllerUser)
	}
}

// TestRealInstallRefusesUnsafeBinDir: the sudoers rule and the units must
// point at binaries only root can replace.
func TestRealInstallRefusesUnsafeBinDir(t *testing.T) {
	if !inPrivateRoot(t, 0) {
		return
	}
	bin := realBinDir(t)
	installer := filepath.Join(bin, "steward-installer")
	if err := os.Chmod(bin, 0o775); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runBin(t, installer, "install")
	if code != ExitFail || out != "" || !strings.Contains(errs, "directory "+bin+" is writable by group (mode 0775)") {
		t.Fatalf("install from a group-writable bin dir: exit %d\n%s%s", code, out, errs)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(bin, "steward-operator"), 0o757); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runBin(t, installer, "install")
	if code != ExitFail || out != "" || !strings.Contains(errs, filepath.Join(bin, "steward-operator")+" is writable by others (mode 0757)") {
		t.Fatalf("install with a world-writable daemon: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Lstat("/" + SudoersFile); err == nil {
		t.Fatal("a refused install wrote the sudoers drop-in")
	}
}
