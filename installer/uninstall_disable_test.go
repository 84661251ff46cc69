package installer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/systemd"
)

// writeUnits writes the files install writes, as systemd.Render makes
// them, under root. (Not installTree: uninstall reads none of the sudoers
// drop-in that needs visudo, and absent is fine for it.)
func writeUnits(t *testing.T, root string) {
	t.Helper()
	files, err := systemd.Render(systemd.UnitParams{BinDir: treeBin})
	if err != nil {
		t.Fatal(err)
	}
	for rel, b := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// enableUnits runs the real systemctl enable on steward's units in the tree
// at root ("/" means the system systemctl sees, which must not be booted).
func enableUnits(t *testing.T, root string) {
	t.Helper()
	systemctl, err := findTool("systemctl", "systemd")
	if err != nil {
		testenv.Missing(t, "the links under test are systemctl enable's: %v", err)
	}
	args := append([]string{"--root=" + root, "enable"}, stewardUnits()...)
	if root == "/" {
		args = args[1:]
	}
	if out, err := exec.Command(systemctl, args...).CombinedOutput(); err != nil {
		t.Fatalf("systemctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// linksIn lists the symbolic links under dir as "REL -> TARGET", sorted.
func linksIn(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type() != os.ModeSymlink {
			return err
		}
		target, err := os.Readlink(p)
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel+" -> "+target)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// enabledLinks are the links systemctl enable makes for steward's units.
func enabledLinks() []string {
	var out []string
	for _, u := range stewardUnits() {
		target := "multi-user.target.wants"
		if strings.HasSuffix(u, ".socket") {
			target = "sockets.target.wants"
		}
		out = append(out, target+"/"+u+" -> /"+systemd.UnitDir+"/"+u)
	}
	slices.Sort(out)
	return out
}

// TestUninstallDisablesRootTree: in a --root tree whose units systemctl
// enabled, uninstall removes every link to them (and an alias and a link
// an older uninstall left dangling) after the sudoers drop-in and before
// the unit files, names each, and leaves links that are not to steward's
// unit files alone. Again, there is nothing left to remove.
func TestUninstallDisablesRootTree(t *testing.T) {
	root := t.TempDir()
	writeUnits(t, root)
	enableUnits(t, root)
	unitDir := filepath.Join(root, systemd.UnitDir)
	if got, want := linksIn(t, unitDir), enabledLinks(); !slices.Equal(got, want) {
		t.Fatalf("systemctl enable made\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An alias (relative, as by hand), and links that are not to steward's
	// unit files: a distribution's file of the same name, another unit,
	// and a unit steward does not install whatever its name.
	for link, target := range map[string]string{
		"steward.service": systemd.OperatorService,
		"default.target.wants/" + systemd.OperatorService: "/usr/lib/systemd/system/" + systemd.OperatorService,
		"multi-user.target.wants/other.service":           "/" + systemd.UnitDir + "/other.service",
		"timers.target.wants/steward-old.timer":           "/" + systemd.UnitDir + "/steward-old.timer",
	} {
		p := filepath.Join(unitDir, link)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// An uninstall that did not disable left the MCP socket's link
	// dangling: its file is gone already.
	if err := os.Remove(filepath.Join(unitDir, systemd.ControllerMCPSocket)); err != nil {
		t.Fatal(err)
	}

	code, out, errs := run(t, treeEnv(), "uninstall", "--root", root)
	if code != ExitOK || errs != "" {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "removed file "+filepath.Join(root, SudoersFile) && lines[0] != "absent file "+filepath.Join(root, SudoersFile) {
		t.Fatalf("uninstall began with %q, want the sudoers drop-in", lines[0])
	}
	var removedLinks []string
	firstUnit := -1
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "removed link "+unitDir+"/"); ok {
			if firstUnit >= 0 {
				t.Errorf("line %d: %q after the first unit file was removed (line %d)", i, l, firstUnit)
			}
			removedLinks = append(removedLinks, rest)
		}
		if firstUnit < 0 && strings.HasPrefix(l, "removed file "+unitDir+"/") {
			firstUnit = i
		}
	}
	slices.Sort(removedLinks)
	want := append(enabledLinks(), "steward.service -> "+systemd.OperatorService)
	slices.Sort(want)
	if !slices.Equal(removedLinks, want) {
		t.Errorf("uninstall removed the links\n%s\nwant\n%s", strings.Join(removedLinks, "\n"), strings.Join(want, "\n"))
	}
	left := []string{
		"default.target.wants/" + systemd.OperatorService + " -> /usr/lib/systemd/system/" + systemd.OperatorService,
		"multi-user.target.wants/other.service -> /" + systemd.UnitDir + "/other.service",
		"timers.target.wants/steward-old.timer -> /" + systemd.UnitDir + "/steward-old.timer",
	}
	if got := linksIn(t, unitDir); !slices.Equal(got, left) {
		t.Errorf("after uninstall the links are\n%s\nwant only\n%s", strings.Join(got, "\n"), strings.Join(left, "\n"))
	}
	for _, u := range stewardUnits() {
		if _, err := os.Lstat(filepath.Join(unitDir, u)); !os.IsNotExist(err) {
			t.Errorf("%s survived uninstall: %v", u, err)
		}
	}

	code, out, errs = run(t, treeEnv(), "uninstall", "--root", root)
	if code != ExitOK || errs != "" || strings.Contains(out, "removed") {
		t.Fatalf("uninstall again: exit %d\n%s%s", code, out, errs)
	}
}

// stewardLinks keeps the links (as linksIn lists them) that point at one
// of steward's unit files.
func stewardLinks(links []string) []string {
	var out []string
	for _, l := range links {
		for _, u := range stewardUnits() {
			if strings.HasSuffix(l, " -> /"+systemd.UnitDir+"/"+u) {
				out = append(out, l)
			}
		}
	}
	return out
}

// TestUninstallRealRootRefusesFirst runs uninstall on the real root, in the
// private root of the real-install tests. Where systemd seems to run
// (/run/systemd/system) but cannot say whether steward's units are active,
// uninstall refuses before it disables or removes anything, as it does for
// an active unit. Where systemd does not run, it removes the links that
// enable the units (that systemctl enable made) and then the units. (The
// refusal of an active unit under a running systemd is the booted
// journey's.)
func TestUninstallRealRootRefusesFirst(t *testing.T) {
	if !inPrivateRoot(t, 1) {
		return
	}
	writeUnits(t, "/")
	enableUnits(t, "/") // offline: /run/systemd/system does not exist yet
	hostCheckpoint(t, "units written and enabled")
	unitDir := "/" + systemd.UnitDir
	before := linksIn(t, unitDir)
	if got := stewardLinks(before); !slices.Equal(got, enabledLinks()) {
		t.Fatalf("systemctl enable made %v", got)
	}
	if err := os.MkdirAll("/run/systemd/system", 0o755); err != nil {
		t.Fatal(err)
	}
	root := Env{EUID: 0, Executable: "/nonexistent/steward-installer"}
	code, out, errs := run(t, root, "uninstall")
	if code != ExitFail || out != "" || !strings.HasPrefix(errs, "steward-installer uninstall: cannot tell whether steward's units run: ") {
		t.Fatalf("uninstall with systemd unreachable: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	t.Logf("refused: %s", strings.TrimSpace(errs))
	if got := linksIn(t, unitDir); !slices.Equal(got, before) {
		t.Fatalf("a refused uninstall changed the links: %v", got)
	}
	for _, u := range stewardUnits() {
		if _, err := os.Lstat(filepath.Join(unitDir, u)); err != nil {
			t.Fatalf("a refused uninstall removed %s: %v", u, err)
		}
	}

	if err := os.Remove("/run/systemd/system"); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(t, root, "uninstall")
	if code != ExitOK || errs != "" {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	for _, l := range enabledLinks() {
		if !strings.Contains(out, fmt.Sprintf("removed link %s/%s\n", unitDir, l)) {
			t.Errorf("uninstall did not say it removed %s:\n%s", l, out)
		}
	}
	if got := stewardLinks(linksIn(t, unitDir)); len(got) != 0 {
		t.Errorf("links left: %v", got)
	}
	t.Logf("uninstall:\n%s", out)
}
