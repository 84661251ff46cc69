package installer

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/stewardrt/steward/systemd"
)

// managedPaths lists the files install writes, in the order uninstall
// removes them: the sudoers drop-in first, so the operator account loses
// its privilege before anything else changes.
func managedPaths() []string {
	// Only the paths are used; they do not depend on the bin dir.
	rendered, err := systemd.Render(systemd.UnitParams{BinDir: "/usr/bin"})
	if err != nil {
		panic("installer: systemd.Render with fixed parameters: " + err.Error())
	}
	out := []string{SudoersFile}
	var rest []string
	for rel := range rendered {
		rest = append(rest, rel)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// runUninstall removes what install made: the sudoers drop-in, the units,
// the sysusers.d and tmpfiles.d files and the runtime directories. State
// directories (keys, journals, the store) and the accounts are kept unless
// --purge. Removing what is already gone is not an error.
func runUninstall(ctx context.Context, c *call, o options) int {
	t, err := resolveTree(o, c.env, ", or give --root DIR")
	if err != nil {
		return c.failf("%v", err)
	}
	if t.real {
		active, err := activeUnits(ctx)
		if err != nil {
			return c.failf("cannot tell whether steward's units run: %v", err)
		}
		if len(active) > 0 {
			return c.failf("refused: %s still active; stop them first (systemctl stop)", strings.Join(active, " "))
		}
	}
	say := func(what string, removed bool) {
		if removed {
			fmt.Fprintf(c.stdout, "removed %s\n", what)
		} else {
			fmt.Fprintf(c.stdout, "absent %s\n", what)
		}
	}
	for _, p := range managedPaths() {
		removed, err := t.remove(p)
		if err != nil {
			return c.failf("%v", err)
		}
		say("file "+t.abs(p), removed)
	}
	dirs := systemd.Dirs()
	for i := len(dirs) - 1; i >= 0; i-- { // children before parents
		d := dirs[i]
		var removed bool
		switch {
		case d.Path == systemd.RuntimeDir:
			// Shared parent: removed only once empty.
			removed, err = t.rmdirIfEmpty(rel(d.Path))
		case d.Runtime || o.purge:
			removed, err = t.removeAll(rel(d.Path))
		default:
			fmt.Fprintf(c.stdout, "kept dir %s (state: keys, journal; --purge removes it)\n", t.abs(rel(d.Path)))
			continue
		}
		if err != nil {
			return c.failf("%v", err)
		}
		say("dir "+t.abs(rel(d.Path)), removed)
	}
	if t.real {
		if !o.purge {
			fmt.Fprintf(c.stdout, "kept accounts %s, %s and group %s (--purge removes them)\n",
				systemd.OperatorUser, systemd.ControllerUser, systemd.AgentsGroup)
		} else if err := removeAccounts(ctx, c); err != nil {
			return c.failf("%v", err)
		}
	}
	fmt.Fprintf(c.stdout, "uninstall: done in %s\n", t.root)
	return ExitOK
}

// removeAccounts deletes steward's users, their groups and steward-agents.
func removeAccounts(ctx context.Context, c *call) error {
	db, err := readAccountDB("/")
	if err != nil {
		return err
	}
	for _, u := range wantUsers() {
		if _, ok := db.users[u.name]; !ok {
			fmt.Fprintf(c.stdout, "absent account %s\n", u.name)
			continue
		}
		userdel, err := findTool("userdel", "passwd")
		if err != nil {
			return err
		}
		if err := runTool(ctx, userdel, u.name); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "removed account %s\n", u.name)
	}
	// userdel removes a user's own group with it where USERGROUPS_ENAB is
	// set; remove whatever group is left.
	if db, err = readAccountDB("/"); err != nil {
		return err
	}
	for _, g := range []string{systemd.OperatorUser, systemd.ControllerUser, systemd.AgentsGroup} {
		if _, ok := db.groups[g]; !ok {
			if g == systemd.AgentsGroup {
				fmt.Fprintf(c.stdout, "absent group %s\n", g)
			}
			continue
		}
		groupdel, err := findTool("groupdel", "passwd")
		if err != nil {
			return err
		}
		if err := runTool(ctx, groupdel, g); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "removed group %s\n", g)
	}
	return nil
}
