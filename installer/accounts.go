package installer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stewardrt/steward/systemd"
)

// systemIDMax is the highest uid or gid of a system account (systemd's and
// Debian's default SYS_UID_MAX).
const systemIDMax = 999

// account is one line of /etc/passwd.
type account struct {
	name     string
	uid, gid uint32
	home     string
	shell    string
}

// accountDB is what /etc/passwd and /etc/group say.
type accountDB struct {
	users  map[string]account
	groups map[string]uint32
	gname  map[uint32]string // gid → group name
}

func readAccountDB(root string) (*accountDB, error) {
	db := &accountDB{users: map[string]account{}, groups: map[string]uint32{}, gname: map[uint32]string{}}
	err := scanColonFile(filepath.Join(root, "etc/passwd"), 7, func(f []string) error {
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("user %q: bad uid or gid", f[0])
		}
		db.users[f[0]] = account{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5], shell: f[6]}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scanColonFile(filepath.Join(root, "etc/group"), 4, func(f []string) error {
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return fmt.Errorf("group %q: bad gid", f[0])
		}
		db.groups[f[0]] = uint32(gid)
		if _, dup := db.gname[uint32(gid)]; !dup {
			db.gname[uint32(gid)] = f[0]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return db, nil
}

// scanColonFile calls fn with the fields of each line of a passwd-style file.
func scanColonFile(path string, nfields int, fn func([]string) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue // blank, comment, or an NIS compat entry
		}
		f := strings.Split(line, ":")
		if len(f) != nfields {
			return fmt.Errorf("%s:%d: %d fields, want %d", path, n, len(f), nfields)
		}
		if err := fn(f); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
	return sc.Err()
}

// uid and gid look an owner up for chown and for comparing owners.
func (db *accountDB) uid(name string) (uint32, bool) {
	if name == "root" {
		return 0, true
	}
	a, ok := db.users[name]
	return a.uid, ok
}

func (db *accountDB) gid(name string) (uint32, bool) {
	if name == "root" {
		return 0, true
	}
	g, ok := db.groups[name]
	return g, ok
}

// wantUsers are steward's users with the home the sysusers.d file gives them.
func wantUsers() []account {
	return []account{
		{name: systemd.OperatorUser, home: systemd.OperatorStateDir},
		{name: systemd.ControllerUser, home: systemd.ControllerStateDir},
	}
}

func nologin(shell string) bool {
	switch shell {
	case "/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false":
		return true
	}
	return false
}

// checkAccounts compares the accounts with what the sysusers.d file creates.
func checkAccounts(db *accountDB) []finding {
	var out []finding
	for _, g := range systemd.Groups() {
		if gid, ok := db.groups[g]; !ok {
			out = append(out, finding{Kind: "group", Name: g, State: stateMissing})
		} else if gid > systemIDMax {
			out = append(out, finding{Kind: "group", Name: g, State: stateDiffers,
				Detail: fmt.Sprintf("gid %d is not a system gid (at most %d)", gid, systemIDMax)})
		} else {
			out = append(out, finding{Kind: "group", Name: g, State: stateOK, Detail: fmt.Sprintf("gid %d", gid)})
		}
	}
	for _, w := range wantUsers() {
		f := finding{Kind: "account", Name: w.name}
		a, ok := db.users[w.name]
		switch {
		case !ok:
			f.State = stateMissing
			if gid, ok := db.groups[w.name]; ok && gid > systemIDMax {
				f.State = stateDiffers
				f.Detail = fmt.Sprintf("no such user, but group %s exists with non-system gid %d", w.name, gid)
			}
		case a.uid > systemIDMax:
			f.State, f.Detail = stateDiffers, fmt.Sprintf("uid %d is not a system uid (at most %d)", a.uid, systemIDMax)
		case db.gname[a.gid] != w.name:
			f.State, f.Detail = stateDiffers, fmt.Sprintf("primary group is gid %d (%s), want its own group %s", a.gid, db.gname[a.gid], w.name)
		case a.home != w.home:
			f.State, f.Detail = stateDiffers, fmt.Sprintf("home %s, want %s", a.home, w.home)
		case !nologin(a.shell):
			f.State, f.Detail = stateDiffers, fmt.Sprintf("login shell %s, want none (nologin)", a.shell)
		default:
			f.State, f.Detail = stateOK, fmt.Sprintf("uid %d gid %d", a.uid, a.gid)
		}
		out = append(out, f)
	}
	return out
}
