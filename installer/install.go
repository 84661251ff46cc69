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
// second run changes nothing. The steps, in order: resolve the tree and
// the files; check the bin dir and the sudoers drop-in; examine; refuse any
// difference; apply (accounts, directories, files: the sudoers drop-in is
// the last of the files); report.
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
	if n := refuseDifferences(c, plan); n > 0 {
		return c.failf("%d difference(s); nothing was changed", n)
	}
	a := newInstallApply(c, t, db, plan)
	if err := a.accounts(ctx, plan, files); err != nil {
		return c.failf("%v", err)
	}
	if err := a.dirs(); err != nil {
		return c.failf("%v", err)
	}
	for _, m := range files {
		if err := a.writeMissing(m); err != nil {
			return c.failf("%v", err)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(c.stdout, "note: %s\n", n)
	}
	fmt.Fprintf(c.stdout, "install: done in %s, %d created, %d already in place\n", t.root, a.created, len(plan)-a.created)
	if t.real {
		fmt.Fprintf(c.stdout, "next: the controller's keys, the operator's store and bundle, then steward-installer controller-config; then systemctl enable --now the units (docs/OPERATING.md)\n")
	}
	return ExitOK
}

// refuseDifferences names each finding that differs from what install
// makes and returns how many there are.
func refuseDifferences(c *call, plan []finding) int {
	refused := 0
	for _, f := range plan {
		if f.State == stateDiffers {
			c.failf("refused: %s %s differs from what install makes: %s", f.Kind, f.Name, f.Detail)
			refused++
		}
	}
	return refused
}

// installApply creates what examine found missing, in dependency order
// (accounts before the directories they own), reporting each thing it
// creates or leaves.
type installApply struct {
	c       *call
	t       tree
	db      *accountDB
	state   map[string]string // "KIND NAME" -> its state as examined, then as made
	written map[string]bool   // managed files already handled, by rel path
	created int
}

func newInstallApply(c *call, t tree, db *accountDB, plan []finding) *installApply {
	a := &installApply{c: c, t: t, db: db, state: map[string]string{}, written: map[string]bool{}}
	for _, f := range plan {
		a.state[f.Kind+" "+f.Name] = f.State
	}
	return a
}

func (a *installApply) report(verb, kind, name, detail string) {
	if detail != "" {
		detail = " (" + detail + ")"
	}
	fmt.Fprintf(a.c.stdout, "%s %s %s%s\n", verb, kind, name, detail)
}

// writeMissing writes a managed file that examine found missing, once.
func (a *installApply) writeMissing(m managedFile) error {
	name := a.t.abs(m.rel)
	if a.written[m.rel] {
		return nil
	}
	a.written[m.rel] = true
	if a.state["file "+name] != stateMissing {
		a.report("unchanged", "file", name, "")
		return nil
	}
	if err := a.t.writeFile(m.rel, m.data, m.mode, owner{set: a.t.real}); err != nil {
		return err
	}
	a.state["file "+name] = stateOK
	a.report("created", "file", name, fmt.Sprintf("%04o", m.mode))
	a.created++
	return nil
}

// accounts creates the missing accounts of a real install through
// systemd-sysusers (its sysusers.d file written first) and reports each.
func (a *installApply) accounts(ctx context.Context, plan []finding, files []managedFile) error {
	if !a.t.real {
		return nil
	}
	missing := false
	for _, f := range plan {
		if (f.Kind == "account" || f.Kind == "group") && f.State == stateMissing {
			missing = true
		}
	}
	if missing {
		sysusers := files[indexOf(files, systemd.SysusersFile)]
		if err := a.writeMissing(sysusers); err != nil {
			return err
		}
		db, err := createAccounts(ctx, a.t.abs(sysusers.rel))
		if err != nil {
			return err
		}
		a.db = db
	}
	for _, f := range checkAccounts(a.db) {
		if a.state[f.Kind+" "+f.Name] == stateMissing {
			a.report("created", f.Kind, f.Name, f.Detail)
			a.created++
		} else {
			a.report("unchanged", f.Kind, f.Name, f.Detail)
		}
	}
	return nil
}

// dirs makes the missing directories with their owners and modes.
func (a *installApply) dirs() error {
	for _, d := range systemd.Dirs() {
		name := a.t.abs(rel(d.Path))
		if a.state["dir "+name] != stateMissing {
			a.report("unchanged", "dir", name, "")
			continue
		}
		own, err := dirOwner(a.t, a.db, d)
		if err == nil {
			err = a.t.mkdir(rel(d.Path), d.Mode, own)
		}
		if err != nil {
			return err
		}
		detail := fmt.Sprintf("%s:%s %04o", d.User, d.Group, d.Mode)
		if !a.t.real {
			detail = fmt.Sprintf("%04o; owner %s:%s left to tmpfiles.d and StateDirectory=", d.Mode, d.User, d.Group)
		}
		a.report("created", "dir", name, detail)
		a.created++
	}
	return nil
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
