package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/internal/testenv"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/host"
	"github.com/stewardrt/steward/wire/msg"
)

// askOutput is an ask as the approvals verbs print it.
type askOutput struct {
	msg.AskView
	Arguments json.RawMessage `json:"arguments"`
}

func decodeAsk(t *testing.T, out string) askOutput {
	t.Helper()
	var a askOutput
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("ask JSON: %v: %q", err, out)
	}
	return a
}

// oneLine is err's text on one line, as the command prints an error.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// approversWorld is a running host with an approvals socket for a group
// made for the test, an account in it and one not (both removed when the
// test ends, even when it fails), and a copy of this test binary the
// accounts can run (runAs).
type approversWorld struct {
	*hosttest.World
	group            string
	gid              uint32
	member, outsider testaccount.Account
	helper           string
	aliceAsk, bobAsk string // raised through the serving host (hosttest.RaiseAsks)
}

func newApproversWorld(t *testing.T) *approversWorld {
	t.Helper()
	testenv.NeedRoot(t, "to make an approvers group and accounts in and out of it")
	stem, err := testaccount.NextStem()
	if err != nil {
		t.Fatal(err)
	}
	aw := &approversWorld{group: stem + "apprs"}
	if aw.gid, err = testaccount.CreateGroup(aw.group); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testaccount.RemoveGroup(aw.group); err != nil {
			t.Errorf("removing the test group: %v", err)
		}
	})
	aw.member = testaccount.New(t, "appr", aw.group)
	aw.outsider = testaccount.New(t, "nonappr")
	aw.World = hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
	// The approvers traverse the world's directory to the socket's, which
	// is setgid to their group as an installation's would be.
	sockDir := filepath.Join(aw.Dir, "approvals")
	if err := os.Chmod(aw.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sockDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sockDir, 0, int(aw.gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sockDir, 0o750|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	aw.Approvals, aw.Approvers = filepath.Join(sockDir, "approvals.sock"), aw.group
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	aw.helper = filepath.Join(aw.Dir, "approver.test")
	if err := os.WriteFile(aw.helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	aw.aliceAsk, aw.bobAsk = hosttest.RaiseAsks(t, aw.World)
	return aw
}

// runAs runs steward-operator args as account a (TestHelperApprover in a
// child process, with the supplementary groups given, as a login of the
// account has those of its account) and returns its exit
// code, stdout and stderr.
func (aw *approversWorld) runAs(t *testing.T, a testaccount.Account, groups []uint32, args ...string) (int, string, string) {
	t.Helper()
	b, _ := json.Marshal(args)
	cmd := exec.Command(aw.helper, "-test.run=^TestHelperApprover$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "OPERATOR_HELPER_APPROVER="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: groups}}
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("approver helper: %v", err)
	}
	return code, out.String(), errs.String()
}

// TestHelperApprover runs in an approver's account: steward-operator with
// the arguments given, or "raw OP" for one admin request the approvals
// verbs never send; it exits with the command's code.
func TestHelperApprover(t *testing.T) {
	env := os.Getenv("OPERATOR_HELPER_APPROVER")
	if env == "" {
		t.Skip("helper process only")
	}
	var args []string
	if err := json.Unmarshal([]byte(env), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if args[0] == "hold" {
		helperHold(args[1], args[2])
	}
	if args[0] == "raw" {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		a, err := admin.DialApprovals(ctx, args[2], args[3])
		if err == nil {
			_, err = a.Do(admin.Request{Op: args[1], Name: "ctl"})
			a.Close()
		}
		fmt.Fprintln(os.Stderr, oneLine(err))
		os.Exit(1)
	}
	os.Exit((&cli.CLI{Stdout: os.Stdout, Stderr: os.Stderr}).Main(args))
}

// TestApprovalsSocketAdmits: the approvals socket is 0660 and of the
// approvers group from the start; an account in the group and the host's
// own are served, a process that has the group but whose account is not
// in it is refused with a signed frame that says why, and any operation
// but the approvals verbs is refused there with its one line.
func TestApprovalsSocketAdmits(t *testing.T) {
	aw := newApproversWorld(t)
	var st syscall.Stat_t
	if err := syscall.Lstat(aw.Approvals, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o660 || st.Gid != aw.gid || st.Uid != 0 {
		t.Fatalf("approvals socket mode %o uid %d gid %d; want 0660, 0, %d", st.Mode&0o7777, st.Uid, st.Gid, aw.gid)
	}
	sock := []string{"--socket", aw.Approvals, "--host-account", "root"}
	list := append([]string{"approvals", "list", "--json"}, sock...)
	var listed []askOutput
	if code, out, errs := aw.runAs(t, aw.member, []uint32{aw.gid}, list...); code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 {
		t.Errorf("a member lists: exit %d %q %q", code, out, errs)
	}
	if code, out, errs := hosttest.RunCLI(list...); code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 {
		t.Errorf("the host's own account lists: exit %d %q %q", code, out, errs)
	}
	// A member answers from its own account: the answer is its uid and
	// account name, whatever the request said.
	code, out, errs := aw.runAs(t, aw.member, []uint32{aw.gid}, append([]string{"approvals", "respond", aw.aliceAsk, "--approve"}, sock...)...)
	if by := fmt.Sprintf("uid:%d", aw.member.UID); code != 0 || decodeAsk(t, out).AnsweredBy != by {
		t.Fatalf("a member answers: exit %d %q %q; want answeredBy %s", code, out, errs, by)
	}
	second := fmt.Sprintf("steward-operator approvals respond: refused: ask %s was already answered: approved by uid:%d (%s) at ",
		aw.aliceAsk, aw.member.UID, aw.member.Name)
	if code, _, errs := hosttest.RunCLI(append([]string{"approvals", "respond", aw.aliceAsk, "--deny"}, sock...)...); code != cli.ExitRefused ||
		!strings.HasPrefix(errs, second) || strings.Count(errs, "\n") != 1 {
		t.Errorf("a second answer: exit %d %q; want %q...", code, errs, second)
	}
	code, _, errs = aw.runAs(t, aw.outsider, []uint32{aw.gid}, list...)
	want := fmt.Sprintf("peer uid %d (%s) is not in the approvers group %s\n", aw.outsider.UID, aw.outsider.Name, aw.group)
	if code != cli.ExitFailure || !strings.HasPrefix(errs, "steward-operator approvals list: ") || !strings.HasSuffix(errs, want) ||
		strings.Count(errs, "\n") != 1 {
		t.Errorf("an account outside the group: exit %d %q; want one line ending %q", code, errs, want)
	}
	for _, op := range []string{admin.OpPurseFreeze, admin.OpAgentSet, admin.OpAttemptList, "no-such-op"} {
		code, _, errs := aw.runAs(t, aw.member, []uint32{aw.gid}, "raw", op, aw.Approvals, "root")
		if want := "refused: " + host.ApprovalsOnly + "\n"; code != 1 || errs != want {
			t.Errorf("%s on the approvals socket: %d %q; want %q", op, code, errs, want)
		}
	}
	// The member could not have frozen the purse: nothing changed.
	if code, out, _ := hosttest.RunCLI("purse", "show", "ctl", "--store", aw.Store, "--json"); code != 0 || strings.Contains(out, `"frozen": true`) {
		t.Fatalf("purse after the refused freeze: %s", out)
	}
}

// TestApprovalsSocketGroup: serve refuses an approvals socket whose
// directory would give it another group than the approvers' (nothing is
// bound, nothing repaired), an unknown group, and either flag alone.
func TestApprovalsSocketGroup(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{})
	plain := filepath.Join(w.Dir, "plain")
	if err := os.Mkdir(plain, 0o750); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(plain, "approvals.sock")
	ctx := context.Background()
	// The group this process has is the one a plain directory gives; the
	// approvers' is another ("nogroup", or whichever exists).
	other := ""
	for _, g := range []string{"nogroup", "nobody", "daemon"} {
		if gid, err := host.ApproversGroup(g); err == nil && gid != uint32(os.Getegid()) {
			other = g
			break
		}
	}
	if other == "" {
		testenv.Missing(t, "no group other than this process's own among nogroup, nobody, daemon")
	}
	gid, _ := host.ApproversGroup(other)
	for _, c := range []struct {
		path, group, want string
	}{
		{sock, other, fmt.Sprintf("refused: approvals socket %s would have gid %d, not group %s (gid %d): make %s setgid to group %s",
			sock, os.Getegid(), other, gid, plain, other)},
		{sock, "stwt-no-such-group", "refused: approvers group stwt-no-such-group: group: unknown group stwt-no-such-group"},
		{sock, "", "refused: approvals socket " + sock + ": --approvers-group GROUP is required"},
		{"", other, "refused: --approvers-group " + other + " without --approvals-socket"},
	} {
		err := host.Serve(ctx, w.Store, host.ServeOptions{ApprovalsSocket: c.path, ApproversGroup: c.group, Ready: func() { t.Error("ready") }})
		if err == nil || err.Error() != c.want {
			t.Errorf("serve %q %q: %v; want %q", c.path, c.group, err, c.want)
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Fatalf("a refused approvals socket is left: %v", err)
		}
	}
}
