package testaccount

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/testenv"
)

func TestNamesCarryTheRun(t *testing.T) {
	stem, err := NextStem()
	if err != nil {
		t.Fatal(err)
	}
	pid, start, ok := creator(stem + "peer")
	self, err := processStart(os.Getpid())
	if !ok || err != nil || pid != os.Getpid() || start != self {
		t.Fatalf("stem %q parses to pid %d start %d (%v), want %d %d", stem, pid, start, ok, os.Getpid(), self)
	}
	if next, _ := NextStem(); next == stem || !strings.HasPrefix(next, Prefix) {
		t.Fatalf("two stems %q %q", stem, next)
	}
	// The longest role the journeys use fits with the largest pid Linux
	// gives (pid_max at most 2^22) and a start time up to 2059.
	worst := Prefix + strconv.FormatInt(1<<22, 36) + "-" + strconv.FormatInt(2840140800, 36) + "-zz-controller"
	if len(worst) > MaxName {
		t.Errorf("%q is %d characters, over %d", worst, len(worst), MaxName)
	}
}

// TestRefusesForeignNames: nothing here creates or removes an account
// outside this run's own names, nor one past useradd's length limit.
func TestRefusesForeignNames(t *testing.T) {
	p, err := runPrefix()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"steward-operator", `testaccount: refused "steward-operator": a test account's name begins with this run's prefix ` + p},
		{"stwt-1-1-0-peer", `testaccount: refused "stwt-1-1-0-peer": a test account's name begins with this run's prefix ` + p},
		{p, `testaccount: refused "` + p + `": a test account's name begins with this run's prefix ` + p},
		{p + strings.Repeat("x", MaxName+1-len(p)), `testaccount: refused "` + p + strings.Repeat("x", MaxName+1-len(p)) + `": 33 characters, useradd takes at most 32`},
	} {
		if _, err := Create(c.name); err == nil || err.Error() != c.want {
			t.Errorf("Create(%q): %v, want %s", c.name, err, c.want)
		}
		if err := Remove(c.name, true); err == nil || err.Error() != c.want {
			t.Errorf("Remove(%q): %v, want %s", c.name, err, c.want)
		}
		if _, err := CreateGroup(c.name); err == nil || err.Error() != c.want {
			t.Errorf("CreateGroup(%q): %v, want %s", c.name, err, c.want)
		}
	}
	if err := ours(p + strings.Repeat("x", MaxName-len(p))); err != nil {
		t.Errorf("a name of exactly %d characters: %v", MaxName, err)
	}
}

func TestNewRemovesAtCleanup(t *testing.T) {
	testenv.NeedRoot(t, "to create an account")
	var a Account
	t.Run("inner", func(t *testing.T) {
		a = New(t, "peer")
		if u, err := user.Lookup(a.Name); err != nil || u.Uid != strconv.Itoa(int(a.UID)) {
			t.Fatalf("account %+v: %v %v", a, u, err)
		}
	})
	if !gone(a.Name, false) || !gone(a.Name, true) {
		t.Fatalf("account or group %s outlived its test", a.Name)
	}
}

// TestSweep: an account and a group made by a process that has ended are
// removed; those of a running process (this one), and a name under Prefix
// that this package did not make, are left.
func TestSweep(t *testing.T) {
	live := New(t, "live") // needs root and the tools
	dead := exec.Command("/bin/cat")
	stdin, err := dead.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := processStart(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stem := Prefix + strconv.FormatInt(int64(dead.Process.Pid), 36) + "-" + strconv.FormatInt(start, 36) + "-0-"
	stale := []string{stem + "acct", stem + "grp"}
	foreign := Prefix + "handmade"
	mustRun(t, "useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", stale[0])
	mustRun(t, "groupadd", "--system", stale[1])
	mustRun(t, "groupadd", "--system", foreign)
	t.Cleanup(func() {
		for _, g := range append(stale, foreign) {
			if !gone(g, true) {
				run("groupdel", g)
			}
		}
		if !gone(stale[0], false) {
			run("userdel", stale[0])
		}
	})

	// While its creator runs, nothing is stale.
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if gone(stale[0], false) || gone(stale[1], true) {
		t.Fatal("Sweep removed the accounts of a running process")
	}
	stdin.Close()
	if err := dead.Wait(); err != nil {
		t.Fatal(err)
	}
	if alive, err := running(dead.Process.Pid, start); alive || err != nil {
		t.Fatalf("ended process: running %v %v", alive, err)
	}
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if !gone(stale[0], false) || !gone(stale[0], true) || !gone(stale[1], true) {
		t.Error("Sweep left the account or group of an ended process")
	}
	if gone(live.Name, false) || gone(foreign, true) {
		t.Error("Sweep removed a running process's account or a name it did not make")
	}
	// A pid the kernel gave to a later process does not keep an account.
	self, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if alive, err := running(os.Getpid(), self-1); alive || err != nil {
		t.Errorf("this pid with another start time: running %v %v", alive, err)
	}
}

func TestCreatorParse(t *testing.T) {
	for name, ok := range map[string]bool{
		"stwt-1a-tx0abc-0-peer": true,
		"stwt-1a-tx0abc-":       false,
		"stwt-1a-tx0abc":        false,
		"stwt-handmade":         false,
		"stwt--tx0abc-0-peer":   false,
		"stwt-1a--0-peer":       false,
		"stwt-1A!-tx0abc-0-x":   false,
		"steward-operator":      false,
	} {
		if _, _, got := creator(name); got != ok {
			t.Errorf("creator(%q): %v, want %v", name, got, ok)
		}
	}
}

func mustRun(t *testing.T, tool string, args ...string) {
	t.Helper()
	if err := run(tool, args...); err != nil {
		t.Fatal(err)
	}
}

// killedChildEnv makes the test binary a child that creates an account,
// prints its name and waits to be killed.
const killedChildEnv = "TESTACCOUNT_KILLED_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(killedChildEnv) == "1" {
		stem, err := NextStem()
		if err == nil {
			var a Account
			a, err = Create(stem + "killed")
			fmt.Println(a.Name)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, os.Stdin) // until killed
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSweepAfterSIGKILL: a test binary killed with SIGKILL while its
// account exists runs no cleanup; the next run's Sweep removes the account.
func TestSweepAfterSIGKILL(t *testing.T) {
	New(t, "sweeper") // needs root and the tools
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(os.Environ(), killedChildEnv+"=1")
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	name, err := bufio.NewReader(stdout).ReadString('\n')
	name = strings.TrimSpace(name)
	if err != nil || gone(name, false) {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("child's account %q: %v", name, err)
	}
	t.Cleanup(func() {
		if !gone(name, false) {
			removeAccount(name, true)
		}
	})
	child.Process.Signal(syscall.SIGKILL)
	if err := child.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v, want killed", err)
	}
	if gone(name, false) {
		t.Fatal("the account went with its killed creator; nothing left to sweep")
	}
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if !gone(name, false) || !gone(name, true) {
		t.Fatalf("Sweep left %s of a killed test binary", name)
	}
}
