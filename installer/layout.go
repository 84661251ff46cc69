package installer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stewardrt/steward/systemd"
	"golang.org/x/sys/unix"
)

// States of a finding.
const (
	stateOK      = "ok"      // present and as install makes it
	stateMissing = "missing" // install would create it
	stateDiffers = "differs" // present but not as install makes it; install refuses
	stateAbsent  = "absent"  // a socket nobody listens on now (not an installation fault)
	stateUnknown = "unknown" // cannot be told here
)

// finding is one line of status, and of install's plan.
type finding struct {
	Kind   string `json:"kind"` // group, account, dir, file, socket, daemon
	Name   string `json:"name"`
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// managedFile is one file install writes, relative to the root.
type managedFile struct {
	rel  string
	data []byte
	mode uint32
}

// managedFiles renders everything install writes for binDir, units first and
// the sudoers drop-in last (so that the privilege is granted only once all
// else is in place, and revoked first by uninstall).
func managedFiles(binDir string) ([]managedFile, error) {
	rendered, err := systemd.Render(systemd.UnitParams{BinDir: binDir})
	if err != nil {
		return nil, err
	}
	var out []managedFile
	for rel, data := range rendered {
		out = append(out, managedFile{rel: rel, data: data, mode: 0o644})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	// The sudoers drop-in: root-only readable, as sudo expects (0440).
	out = append(out, managedFile{rel: SudoersFile, data: renderSudoers(binDir), mode: 0o440})
	return out, nil
}

// rel turns an absolute system path into one relative to the root.
func rel(abs string) string { return strings.TrimPrefix(abs, "/") }

// resolveBinDir picks --bin-dir or the running installer's directory.
func resolveBinDir(o options, env Env) (string, error) {
	if o.binDir != "" {
		if !filepath.IsAbs(o.binDir) {
			return "", fmt.Errorf("--bin-dir %q is not absolute", o.binDir)
		}
		return filepath.Clean(o.binDir), nil
	}
	if env.Executable == "" || !filepath.IsAbs(env.Executable) {
		return "", fmt.Errorf("cannot tell where steward-installer runs from (%q); give --bin-dir", env.Executable)
	}
	return filepath.Dir(env.Executable), nil
}

// resolveBinFiles resolves the bin dir (resolveBinDir) and renders the
// managed files for it.
func resolveBinFiles(o options, env Env) (binDir string, files []managedFile, err error) {
	if binDir, err = resolveBinDir(o, env); err != nil {
		return "", nil, err
	}
	if files, err = managedFiles(binDir); err != nil {
		return "", nil, err
	}
	return binDir, files, nil
}

// resolveTree picks --root or the real system, which only root may work
// on; a refusal for want of root goes on with asRoot, which says what to do.
func resolveTree(o options, env Env, asRoot string) (tree, error) {
	t, err := pickTree(o)
	if err == nil && t.real && env.EUID != 0 {
		return tree{}, fmt.Errorf("must run as root (euid is %d)%s", env.EUID, asRoot)
	}
	return t, err
}

// pickTree picks --root or the real system.
func pickTree(o options) (tree, error) {
	if o.root == "" {
		return tree{root: "/", real: true}, nil
	}
	abs, err := filepath.Abs(o.root)
	if err != nil {
		return tree{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return tree{}, fmt.Errorf("--root: %v", err)
	}
	if !fi.IsDir() {
		return tree{}, fmt.Errorf("--root %s is not a directory", abs)
	}
	if abs == "/" {
		return tree{root: "/", real: true}, nil
	}
	return tree{root: abs}, nil
}

// examine compares what install makes with what is there: the accounts
// (on the real system only), steward's directories and the managed files,
// in that order. It returns the account database it read, nil under --root.
func examine(t tree, files []managedFile) (*accountDB, []finding, error) {
	var db *accountDB
	var found []finding
	if t.real {
		var err error
		if db, err = readAccountDB("/"); err != nil {
			return nil, nil, err
		}
		found = append(found, checkAccounts(db)...)
	}
	for _, d := range systemd.Dirs() {
		found = append(found, checkDir(t, db, d))
	}
	for _, m := range files {
		found = append(found, checkFile(t, db, m))
	}
	return db, found, nil
}

// checkFile compares one managed file with what is there.
func checkFile(t tree, db *accountDB, m managedFile) finding {
	f := finding{Kind: "file", Name: t.abs(m.rel)}
	st, ok := lstatAs(t, m.rel, unix.S_IFREG, m.mode, &f)
	switch {
	case !ok:
		return f
	case t.real && (st.Uid != 0 || st.Gid != 0):
		f.State, f.Detail = stateDiffers, fmt.Sprintf("owner %d:%d, want root:root", st.Uid, st.Gid)
		return f
	}
	have, err := t.readFile(m.rel)
	if err != nil {
		f.State, f.Detail = stateDiffers, err.Error()
		return f
	}
	if string(have) != string(m.data) {
		f.State, f.Detail = stateDiffers, firstDifference(have, m.data)
		return f
	}
	f.State = stateOK
	return f
}

// checkDir compares one of steward's directories with what is there.
func checkDir(t tree, db *accountDB, d systemd.Dir) finding {
	f := finding{Kind: "dir", Name: t.abs(rel(d.Path))}
	st, ok := lstatAs(t, rel(d.Path), unix.S_IFDIR, d.Mode, &f)
	if !ok {
		return f
	}
	if t.real {
		if d := ownerDiff(db, st.Uid, st.Gid, d.User, d.Group); d != "" {
			f.State, f.Detail = stateDiffers, d
			return f
		}
		f.Detail = fmt.Sprintf("%s:%s %04o", d.User, d.Group, d.Mode)
	} else {
		f.Detail = fmt.Sprintf("%04o; owner not checked under --root", d.Mode)
	}
	f.State = stateOK
	return f
}

// lstatAs looks at rel, not following a link, and compares its type with
// ifmt and its permission bits with mode. Where it cannot look, nothing is
// there or either differs, it sets f's state and detail (nothing there:
// missing) and returns false; else it returns what it found for the
// remaining checks.
func lstatAs(t tree, rel string, ifmt, mode uint32, f *finding) (unix.Stat_t, bool) {
	st, ok, err := t.lstat(rel)
	switch {
	case err != nil:
		f.State, f.Detail = stateDiffers, err.Error()
	case !ok:
		f.State = stateMissing
	case st.Mode&unix.S_IFMT != ifmt:
		f.State, f.Detail = stateDiffers, fmt.Sprintf("a %s, want %s", fileType(st.Mode), wantType[ifmt])
	case st.Mode&0o7777 != mode:
		f.State, f.Detail = stateDiffers, fmt.Sprintf("mode %04o, want %04o", st.Mode&0o7777, mode)
	default:
		return st, true
	}
	return st, false
}

// wantType names a file type as a finding wants it.
var wantType = map[uint32]string{unix.S_IFREG: "a regular file", unix.S_IFDIR: "a directory", unix.S_IFSOCK: "a socket"}

// ownerDiff says how uid:gid differ from user:group, or "".
func ownerDiff(db *accountDB, uid, gid uint32, user, group string) string {
	wu, uok := db.uid(user)
	wg, gok := db.gid(group)
	if !uok || !gok || uid != wu || gid != wg {
		return fmt.Sprintf("owner %d:%d, want %s:%s", uid, gid, user, group)
	}
	return ""
}

// dirOwner resolves a directory's owner for mkdir.
func dirOwner(t tree, db *accountDB, d systemd.Dir) (owner, error) {
	if !t.real {
		return owner{}, nil
	}
	uid, uok := db.uid(d.User)
	gid, gok := db.gid(d.Group)
	if !uok || !gok {
		return owner{}, fmt.Errorf("%s: account %s or group %s does not exist", d.Path, d.User, d.Group)
	}
	return owner{set: true, uid: uid, gid: gid}, nil
}
