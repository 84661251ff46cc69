package testscript_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stewardrt/steward/internal/testaccount"
)

// The accounts journey runs each daemon under its own OS account. These
// commands create what it needs as root; each refuses to run otherwise.

// needRoot fails a command that only root can run.
func needRoot(ts *testscript.TestScript, cmd string) {
	if os.Geteuid() != 0 {
		ts.Fatalf("%s needs root (guard the journey with [!need:root] skip)", cmd)
	}
}

// cmdAccount implements `account VAR NAME [GROUP...]`: creates the system
// account NAME (its own group, no home, no login shell), a member of each
// GROUP, and sets VAR to its UID. NAME must begin with the journey's $ACCT,
// a name stem of this test binary's run (package testaccount), so that no
// journey makes an account anyone else uses, and the account must not exist
// yet. It is removed when the journey ends, failed or not (userdel --force:
// the journey's daemons are stopped only after its deferred cleanups run);
// what a killed test binary leaves is swept by the next run.
func cmdAccount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: account VAR NAME [GROUP...]")
	}
	needRoot(ts, "account")
	name := args[1]
	journeyName(ts, name)
	a, err := testaccount.Create(name, args[2:]...)
	ts.Check(err)
	ts.Defer(func() {
		if err := testaccount.Remove(name, true); err != nil {
			fmt.Fprintf(os.Stderr, "testscript: %v\n", err)
		}
	})
	ts.Setenv(args[0], strconv.FormatUint(uint64(a.UID), 10))
}

// cmdGroup implements `group VAR NAME`: creates the system group NAME
// (under $ACCT, as for account) and sets VAR to its GID; it is removed
// when the journey ends.
func cmdGroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: group VAR NAME")
	}
	needRoot(ts, "group")
	name := args[1]
	journeyName(ts, name)
	gid, err := testaccount.CreateGroup(name)
	ts.Check(err)
	ts.Defer(func() {
		if err := testaccount.RemoveGroup(name); err != nil {
			fmt.Fprintf(os.Stderr, "testscript: %v\n", err)
		}
	})
	ts.Setenv(args[0], strconv.FormatUint(uint64(gid), 10))
}

// journeyName refuses an account or group name outside the journey's own
// stem.
func journeyName(ts *testscript.TestScript, name string) {
	if stem := ts.Getenv("ACCT"); stem == "" || !strings.HasPrefix(name, stem) {
		ts.Fatalf("%q does not begin with this journey's $ACCT (%s): a journey names its accounts ${ACCT}ROLE", name, stem)
	}
}

func run(ts *testscript.TestScript, name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		ts.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// cmdMkshared implements `mkshared VAR`: creates a fresh directory under
// shortTempRoot (it holds sockets), owned by root with mode 0755 so that
// every account can reach what is inside it (the journey's $WORK is private
// to root), sets VAR to it, and removes it when the journey ends.
func cmdMkshared(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkshared VAR")
	}
	dir, err := os.MkdirTemp(shortTempRoot, "stwj-")
	ts.Check(err)
	ts.Defer(func() { os.RemoveAll(dir) })
	ts.Check(os.Chmod(dir, 0o755))
	ts.Setenv(args[0], dir)
}

// cmdMkdirown implements `mkdirown PATH USER:GROUP MODE`: creates the
// directory PATH (its parent must exist), changes its owner, then its mode
// (octal, setgid allowed: chown may clear the setgid bit, so chmod comes
// last).
func cmdMkdirown(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mkdirown PATH USER:GROUP MODE")
	}
	path := ts.MkAbs(args[0])
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		ts.Fatalf("mkdirown: %v", err)
	}
	chownMod(ts, path, args[1], args[2])
}

// cmdCpown implements `cpown SRC DST USER:GROUP MODE`: copies a file and
// gives the copy an owner and a mode.
func cmdCpown(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: cpown SRC DST USER:GROUP MODE")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	dst := ts.MkAbs(args[1])
	ts.Check(os.WriteFile(dst, b, 0o600))
	chownMod(ts, dst, args[2], args[3])
}

func chownMod(ts *testscript.TestScript, path, owner, mode string) {
	needRoot(ts, "chown")
	uname, gname, ok := strings.Cut(owner, ":")
	if !ok {
		ts.Fatalf("%q is not USER:GROUP", owner)
	}
	u, err := user.Lookup(uname)
	ts.Check(err)
	g, err := user.LookupGroup(gname)
	ts.Check(err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	ts.Check(os.Lchown(path, uid, gid))
	m, err := strconv.ParseUint(mode, 8, 32)
	ts.Check(err)
	ts.Check(syscall.Chmod(path, uint32(m)))
}

// credentialOf is the identity a child runs with: USER, or USER:GROUP,...
// for USER with exactly those supplementary groups instead of its own.
func credentialOf(ts *testscript.TestScript, spec string) *syscall.Credential {
	name, groups, explicit := strings.Cut(spec, ":")
	u, err := user.Lookup(name)
	ts.Check(err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	var gids []string
	if explicit {
		for _, g := range strings.Split(groups, ",") {
			if g == "" {
				continue
			}
			grp, err := user.LookupGroup(g)
			ts.Check(err)
			gids = append(gids, grp.Gid)
		}
	} else {
		gids, err = u.GroupIds()
		ts.Check(err)
	}
	for _, g := range gids {
		n, _ := strconv.Atoi(g)
		cred.Groups = append(cred.Groups, uint32(n))
	}
	return cred
}

// dialHelper is the child of `dial-as`: it dials the socket in its
// argument, reads what the listener says first (a refusal is written at
// once; an admitted peer is waited on for the protocol's first message),
// and prints it. It is registered with testscript.Main (see commands), so
// that it is this test binary copied into the journeys' bin directory,
// which any account can run.
func dialHelper(path string) int {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		fmt.Printf("dial error: %v\n", err)
		return 1
	}
	defer c.Close()
	fmt.Println("connected")
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b, err := io.ReadAll(io.LimitReader(c, 64<<10))
	if len(b) == 0 {
		fmt.Printf("nothing received (%v)\n", err)
		return 0
	}
	fmt.Printf("received %d bytes: %s\n", len(b), printable(b))
	return 0
}

// printable keeps the runs of printable text in b (the reason of a signed
// refusal frame is a CBOR text string inside it), separated by " | ".
func printable(b []byte) string {
	var runs []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() >= 4 {
			runs = append(runs, cur.String())
		}
		cur.Reset()
	}
	for _, r := range string(b) {
		if r != unicode.ReplacementChar && unicode.IsPrint(r) {
			cur.WriteRune(r)
			continue
		}
		flush()
	}
	flush()
	return strings.Join(runs, " | ")
}

// cmdDialAs implements `[!] dial-as USER[:GROUP,...] SOCKET`: connects to a
// socket as another account (with exactly the listed supplementary groups
// when given, so that file permissions let it reach the socket and the
// listener's own peer check is what decides), and prints what came back:
// "dial error: ..." when the kernel refused (permissions), "connected" and
// the text of what the listener answered otherwise. It fails when the dial
// fails, unless negated.
func cmdDialAs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: dial-as USER[:GROUP,...] SOCKET")
	}
	needRoot(ts, "dial-as")
	cmd := exec.Command(filepath.Join(binDir, dialHelperName), ts.MkAbs(args[1]))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialOf(ts, args[0])}
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(ts.Stdout(), "%s", out)
	if err != nil && !neg {
		ts.Fatalf("dial-as %s %s: %v", args[0], args[1], err)
	}
	if err == nil && neg {
		ts.Fatalf("dial-as %s %s: unexpected success", args[0], args[1])
	}
}

// dialHelperName is the dial helper's name in the journeys' bin directory.
const dialHelperName = "steward-journey-dial"
