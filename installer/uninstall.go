package installer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/stewardrt/steward/systemd"
	"golang.org/x/sys/unix"
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

// runUninstall removes what install made: the sudoers drop-in first; then
// it disables the units (on a booted system, systemctl disable; on any
// tree, every link that enables one of them is removed) and removes them,
// the sysusers.d and tmpfiles.d files and the runtime directories. State
// directories (keys, journals, the store) and the accounts are kept unless
// --purge. On a booted system it refuses while a unit is active, before
// anything changes, and reloads systemd once the units are gone. Removing
// what is already gone is not an error.
func runUninstall(ctx context.Context, c *call, o options) int {
	t, err := resolveTree(o, c.env, ", or give --root DIR")
	if err != nil {
		return c.failf("%v", err)
	}
	booted := t.real && sdBooted()
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
	removeFiles := func(paths []string) error {
		for _, p := range paths {
			removed, err := t.remove(p)
			if err != nil {
				return err
			}
			say("file "+t.abs(p), removed)
		}
		return nil
	}
	// The sudoers drop-in first (managedPaths): the operator loses its
	// privilege before anything else changes. Then the units are disabled
	// before their files go, so that no link is left to a unit that is gone.
	paths := managedPaths()
	if err := removeFiles(paths[:1]); err != nil {
		return c.failf("%v", err)
	}
	if err := disableUnits(ctx, c, t, booted); err != nil {
		return c.failf("%v", err)
	}
	if err := removeFiles(paths[1:]); err != nil {
		return c.failf("%v", err)
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
	if booted {
		if err := reloadSystemd(ctx); err != nil {
			return c.failf("%v", err)
		}
		fmt.Fprintf(c.stdout, "reloaded systemd (systemctl daemon-reload): it has forgotten the removed units\n")
	}
	if t.real {
		if !o.purge {
			fmt.Fprintf(c.stdout, "kept accounts %s, %s and groups %s (--purge removes them)\n",
				systemd.OperatorUser, systemd.ControllerUser, strings.Join(systemd.Groups(), ", "))
		} else if err := removeAccounts(ctx, c); err != nil {
			return c.failf("%v", err)
		}
	}
	fmt.Fprintf(c.stdout, "uninstall: done in %s\n", t.root)
	return ExitOK
}

// removeAccounts deletes steward's users, their groups and systemd.Groups.
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
	for _, g := range append([]string{systemd.OperatorUser, systemd.ControllerUser}, systemd.Groups()...) {
		if _, ok := db.groups[g]; !ok {
			if slices.Contains(systemd.Groups(), g) {
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

// stewardUnits are the names of the units install writes (the files of
// managedPaths directly in systemd.UnitDir).
func stewardUnits() []string {
	var units []string
	for _, p := range managedPaths() {
		if path.Dir(p) == systemd.UnitDir {
			units = append(units, path.Base(p))
		}
	}
	return units
}

// disableUnits undoes `systemctl enable` of steward's units. On a booted
// system, systemctl disables the units whose files are still there (it
// knows their [Install] sections); then, on any tree, disableUnits removes
// every link left in systemd.UnitDir that enables one of them, each named
// on stdout. That covers a --root tree, a system where systemd does not
// run, links made by hand, and links an older uninstall left dangling.
func disableUnits(ctx context.Context, c *call, t tree, booted bool) error {
	units := stewardUnits()
	if booted {
		var present []string
		for _, u := range units {
			_, ok, err := t.lstat(path.Join(systemd.UnitDir, u))
			if err != nil {
				return err
			}
			if ok {
				present = append(present, u)
			}
		}
		if len(present) > 0 {
			systemctl, err := findTool("systemctl", "systemd")
			if err != nil {
				return err
			}
			// One daemon-reload, once the files are gone (reloadSystemd).
			if err := runTool(ctx, systemctl, append([]string{"disable", "--no-reload", "--"}, present...)...); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "disabled %s (systemctl disable)\n", strings.Join(present, " "))
		}
	}
	links, err := enablingLinks(t, units)
	if err != nil {
		return err
	}
	for _, l := range links {
		removed, err := t.remove(l.rel)
		if err != nil {
			return err
		}
		if removed {
			fmt.Fprintf(c.stdout, "removed link %s -> %s\n", t.abs(l.rel), l.target)
		}
	}
	return nil
}

// reloadSystemd has systemd reread its unit files.
func reloadSystemd(ctx context.Context) error {
	systemctl, err := findTool("systemctl", "systemd")
	if err != nil {
		return err
	}
	return runTool(ctx, systemctl, "daemon-reload")
}

// unitLink is a symbolic link that enables one of steward's units.
type unitLink struct {
	rel    string // the link, relative to the tree's root
	target string // what it points at, as it reads
}

// isEnablingDir reports whether a directory in systemd.UnitDir is one
// systemctl enable links units into: TARGET.wants for WantedBy=,
// TARGET.requires for RequiredBy=, TARGET.upholds for UpheldBy=.
func isEnablingDir(name string) bool {
	return strings.HasSuffix(name, ".wants") || strings.HasSuffix(name, ".requires") || strings.HasSuffix(name, ".upholds")
}

// enablingLinks finds the links in systemd.UnitDir (an Alias=) and in its
// enabling directories that point at one of units' files there. A link
// counts by where it points, read without following it, so a dangling one
// counts too; systemctl writes the target as an absolute path inside the
// tree ("/etc/systemd/system/UNIT", under --root as well), and a relative
// target is taken from the link's directory.
func enablingLinks(t tree, units []string) ([]unitLink, error) {
	files := make(map[string]bool, len(units))
	for _, u := range units {
		files["/"+path.Join(systemd.UnitDir, u)] = true
	}
	var links []unitLink
	subdirs, err := scanLinks(t, systemd.UnitDir, files, &links)
	if err != nil {
		return nil, err
	}
	for _, d := range subdirs {
		if _, err := scanLinks(t, path.Join(systemd.UnitDir, d), files, &links); err != nil {
			return nil, err
		}
	}
	return links, nil
}

// scanLinks appends to links the links in directory rel that point at one
// of files (tree paths), and returns the names of the enabling
// directories in rel. A missing rel holds nothing.
func scanLinks(t tree, rel string, files map[string]bool, links *[]unitLink) ([]string, error) {
	dfd, err := t.openDir(rel, false)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	dir := os.NewFile(uintptr(dfd), t.abs(rel))
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", t.abs(rel), err)
	}
	var subdirs []string
	for _, e := range entries {
		switch {
		case e.IsDir() && isEnablingDir(e.Name()):
			subdirs = append(subdirs, e.Name())
		case e.Type() == fs.ModeSymlink:
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(dfd, e.Name(), buf)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", t.abs(path.Join(rel, e.Name())), err)
			}
			target := string(buf[:n])
			points := target
			if !path.IsAbs(points) {
				points = path.Join("/"+rel, points)
			}
			if files[path.Clean(points)] {
				*links = append(*links, unitLink{rel: path.Join(rel, e.Name()), target: target})
			}
		}
	}
	return subdirs, nil
}
