package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/systemd"
)

// hostSteward lists what this machine shows of steward where a real
// install writes: account and group names that are the installer's or
// begin with "steward" in /etc/passwd, group, shadow and gshadow; every
// path under the sudoers, unit, sysusers.d and tmpfiles.d directories; and
// the entries of /var/lib and /run that begin with "steward". (Not the
// whole account files: other packages' tests, running at the same time,
// add and remove their own test accounts there.)
func hostSteward() ([]string, error) {
	var out []string
	installers := map[string]bool{systemd.OperatorUser: true, systemd.ControllerUser: true, systemd.AgentsGroup: true, systemd.ApproversGroup: true}
	for _, f := range []string{"/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if name, _, _ := strings.Cut(l, ":"); installers[name] || strings.HasPrefix(name, "steward") {
				out = append(out, f+": "+name)
			}
		}
	}
	for _, d := range []string{filepath.Dir(SudoersFile), systemd.UnitDir, filepath.Dir(systemd.SysusersFile), filepath.Dir(systemd.TmpfilesFile)} {
		err := filepath.WalkDir("/"+d, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				out = append(out, p)
			}
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	for _, d := range []string{"/var/lib", "/run"} {
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "steward") {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// diffLines says which lines only before or only after has, or "".
func diffLines(before, after []string) string {
	in := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	b, a := in(before), in(after)
	var d strings.Builder
	for _, s := range before {
		if !a[s] {
			fmt.Fprintf(&d, "- %s\n", s)
		}
	}
	for _, s := range after {
		if !b[s] {
			fmt.Fprintf(&d, "+ %s\n", s)
		}
	}
	return d.String()
}

// needRealInstallTools skips (fails under CI=true) unless a real install
// can run: root, and the tools it and the tests run.
func needRealInstallTools(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "for a real install")
	needVisudo(t)
	for _, tool := range []string{"systemd-sysusers", "userdel", "groupdel", "useradd"} {
		if _, err := findTool(tool, "systemd or passwd"); err != nil {
			testenv.Missing(t, "%v", err)
		}
	}
	if _, err := os.Stat("/usr/bin/sudo"); err != nil {
		testenv.Missing(t, "sudo is not installed (.ci/run installs it)")
	}
}

// needNoInstallation skips unless this machine has no steward installation:
// its private copy of /etc would carry that installation's accounts and
// files, which the test would find instead of making them. (On CI's fresh
// machine there is none, so there it fails instead.)
func needNoInstallation(t *testing.T) {
	t.Helper()
	for _, name := range []string{systemd.OperatorUser, systemd.ControllerUser} {
		if _, err := user.Lookup(name); err == nil {
			testenv.Missing(t, "account %s exists: a real steward installation is present, and the private /etc would copy it", name)
		}
	}
	for _, g := range append(systemd.Groups(), systemd.OperatorUser, systemd.ControllerUser) {
		if _, err := user.LookupGroup(g); err == nil {
			testenv.Missing(t, "group %s exists: a real steward installation is present, and the private /etc would copy it", g)
		}
	}
	for _, p := range managedPaths() {
		if _, err := os.Lstat("/" + p); err == nil {
			testenv.Missing(t, "/%s exists: a real steward installation is present, and the private /etc would copy it", p)
		}
	}
}
