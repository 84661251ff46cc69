package installer

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/stewardrt/steward/systemd"
	"golang.org/x/sys/unix"
)

// runInstall puts steward in place: accounts (real install only), its
// directories, the units, the sysusers.d and tmpfiles.d files and the
// sudoers drop-in. It first examines everything; if anything present differs
// from what it would make, it refuses, naming each difference, and changes
// nothing. Otherwise it creates what is missing and leaves the rest, so a
// second run changes nothing.
func runInstall(ctx context.Context, c *call, o options) int {
	t, err := resolveTree(o, c.env, ", or give --root DIR")
	if err != nil {
		return c.failf("%v", err)
	}
	binDir, files, err := resolveBinFiles(o, c.env)
	if err != nil {
		return c.failf("%v", err)
	}
	var notes []string
	if t.real {
		if notes, err = checkBinDir(binDir); err != nil {
			return c.failf("%v", err)
		}
	}
	if err := checkSudoers(ctx, files[len(files)-1].data); err != nil {
		return c.failf("%v", err)
	}

	db, plan, err := examine(t, files)
	if err != nil {
		return c.failf("%v", err)
	}
	refused := 0
	for _, f := range plan {
		if f.State == stateDiffers {
			c.failf("refused: %s %s differs from what install makes: %s", f.Kind, f.Name, f.Detail)
			refused++
		}
	}
	if refused > 0 {
		return c.failf("%d difference(s); nothing was changed", refused)
	}

	// Apply, in dependency order: accounts before the directories they
	// own, the sudoers drop-in last.
	state := map[string]string{}
	for _, f := range plan {
		state[f.Kind+" "+f.Name] = f.State
	}
	report := func(verb, kind, name, detail string) {
		if detail != "" {
			detail = " (" + detail + ")"
		}
		fmt.Fprintf(c.stdout, "%s %s %s%s\n", verb, kind, name, detail)
	}
	created := 0
	written := map[string]bool{}
	writeMissing := func(m managedFile) error {
		name := t.abs(m.rel)
		if written[m.rel] {
			return nil
		}
		written[m.rel] = true
		if state["file "+name] != stateMissing {
			report("unchanged", "file", name, "")
			return nil
		}
		own := owner{set: t.real}
		if err := t.writeFile(m.rel, m.data, m.mode, own); err != nil {
			return err
		}
		state["file "+name] = stateOK
		report("created", "file", name, fmt.Sprintf("%04o", m.mode))
		created++
		return nil
	}
	if t.real {
		missing := false
		for _, f := range plan {
			if (f.Kind == "account" || f.Kind == "group") && f.State == stateMissing {
				missing = true
			}
		}
		if missing {
			sysusers := files[indexOf(files, systemd.SysusersFile)]
			if err := writeMissing(sysusers); err != nil {
				return c.failf("%v", err)
			}
			if db, err = createAccounts(ctx, t.abs(sysusers.rel)); err != nil {
				return c.failf("%v", err)
			}
		}
		for _, f := range checkAccounts(db) {
			if state[f.Kind+" "+f.Name] == stateMissing {
				report("created", f.Kind, f.Name, f.Detail)
				created++
			} else {
				report("unchanged", f.Kind, f.Name, f.Detail)
			}
		}
	}
	for _, d := range systemd.Dirs() {
		name := t.abs(rel(d.Path))
		if state["dir "+name] != stateMissing {
			report("unchanged", "dir", name, "")
			continue
		}
		own, err := dirOwner(t, db, d)
		if err == nil {
			err = t.mkdir(rel(d.Path), d.Mode, own)
		}
		if err != nil {
			return c.failf("%v", err)
		}
		detail := fmt.Sprintf("%s:%s %04o", d.User, d.Group, d.Mode)
		if !t.real {
			detail = fmt.Sprintf("%04o; owner %s:%s left to tmpfiles.d and StateDirectory=", d.Mode, d.User, d.Group)
		}
		report("created", "dir", name, detail)
		created++
	}
	for _, m := range files {
		if err := writeMissing(m); err != nil {
			return c.failf("%v", err)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(c.stdout, "note: %s\n", n)
	}
	fmt.Fprintf(c.stdout, "install: done in %s, %d created, %d already in place\n", t.root, created, len(plan)-created)
	if t.real {
		fmt.Fprintf(c.stdout, "next: systemctl daemon-reload; then enable the units once the controller is enrolled\n")
	}
	return ExitOK
}

func indexOf(files []managedFile, rel string) int {
	for i, m := range files {
		if m.rel == rel {
			return i
		}
	}
	panic("installer: no managed file " + rel)
}

// createAccounts runs systemd-sysusers on the installed sysusers.d file, as
// boot would, and checks the result.
func createAccounts(ctx context.Context, sysusersFile string) (*accountDB, error) {
	tool, err := findTool("systemd-sysusers", "systemd")
	if err != nil {
		return nil, fmt.Errorf("cannot create the accounts: %v", err)
	}
	if err := runTool(ctx, tool, sysusersFile); err != nil {
		return nil, err
	}
	db, err := readAccountDB("/")
	if err != nil {
		return nil, err
	}
	for _, f := range checkAccounts(db) {
		if f.State != stateOK {
			return nil, fmt.Errorf("after systemd-sysusers, %s %s is %s %s", f.Kind, f.Name, f.State, f.Detail)
		}
	}
	return db, nil
}

// checkBinDir makes sure nobody but root can replace what the sudoers rule
// and the units run as root or as steward's accounts: every directory from /
// to binDir is root's and not writable by others (a root-owned sticky
// directory such as /tmp aside), and steward-installer is there, root's and
// not writable by others. The daemons may not be built yet; their absence
// is noted, not refused.
func checkBinDir(binDir string) (notes []string, err error) {
	fd, err := openDirChain(binDir, func(p string, st *unix.Stat_t) error {
		if st.Uid != 0 {
			return fmt.Errorf("%w: directory %s is owned by uid %d, not root", ErrUnsafeDir, p, st.Uid)
		}
		return notWritableByOthers(p, st)
	})
	if err != nil {
		return nil, fmt.Errorf("bin dir %s: %w", binDir, err)
	}
	defer unix.Close(fd)
	for _, name := range []string{"steward-installer", "steward-operator", "steward-controller"} {
		p := filepath.Join(binDir, name)
		var st unix.Stat_t
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == unix.ENOENT && name == "steward-installer":
			return nil, fmt.Errorf("%s does not exist: the sudoers rule would name nothing", p)
		case err == unix.ENOENT:
			notes = append(notes, fmt.Sprintf("%s does not exist yet; its unit cannot start until it does", p))
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: %v", p, err)
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return nil, fmt.Errorf("%s is a %s, not a regular file", p, fileType(st.Mode))
		case st.Uid != 0:
			return nil, fmt.Errorf("%s is owned by uid %d, not root", p, st.Uid)
		case st.Mode&0o022 != 0:
			return nil, fmt.Errorf("%s is writable by others (mode %04o)", p, st.Mode&0o7777)
		}
	}
	return notes, nil
}
