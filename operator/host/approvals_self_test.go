package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// helperHold runs in an approver's account: it dials the approvals socket
// at path (served by hostAccount), lists once and says "listed" on
// stdout, waits for a line on stdin, then lists again on the same
// connection and prints that second request's error on stderr, then a
// third one's, and exits 1.
func helperHold(path, hostAccount string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := admin.DialApprovals(ctx, path, hostAccount)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", oneLine(err))
		os.Exit(1)
	}
	defer a.Close()
	if _, err := a.Do(admin.Request{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{}}); err != nil {
		fmt.Fprintln(os.Stderr, "first:", oneLine(err))
		os.Exit(1)
	}
	fmt.Println("listed")
	bufio.NewReader(os.Stdin).ReadString('\n')
	_, err = a.Do(admin.Request{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{}})
	fmt.Fprintln(os.Stderr, "second:", errText(err))
	_, err = a.Do(admin.Request{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{}})
	fmt.Fprintln(os.Stderr, "third:", errText(err))
	os.Exit(1)
}

func errText(err error) string {
	if err == nil {
		return "served"
	}
	return oneLine(err)
}

// TestApprovalsGroupCheckedPerRequest is the attacker's kept connection:
// a member of the approvers group connects to the approvals socket and is
// served; the administrator removes its account from the group (gpasswd
// -d) while the connection stays open; its next request is refused with
// one line naming the group, the connection is closed (the request after
// fails on it), and nothing it asked was done.
func TestApprovalsGroupCheckedPerRequest(t *testing.T) {
	aw := newApproversWorld(t)
	b, _ := json.Marshal([]string{"hold", aw.Approvals, "root"})
	cmd := exec.Command(aw.helper, "-test.run=^TestHelperApprover$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "OPERATOR_HELPER_APPROVER="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: aw.member.UID, Gid: aw.member.GID, Groups: []uint32{aw.gid}}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errs strings.Builder
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "listed\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the member's first request: %q %v; stderr %q", line, err, errs.String())
	}
	if out, err := exec.Command("gpasswd", "-d", aw.member.Name, aw.group).CombinedOutput(); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("gpasswd -d: %v %s", err, out)
	}
	stdin.Write([]byte("go\n"))
	cmd.Wait()
	got := strings.Split(strings.TrimSuffix(errs.String(), "\n"), "\n")
	want := fmt.Sprintf("second: refused: peer uid %d (%s) is not in the approvers group %s any more; the connection is closed", aw.member.UID, aw.member.Name, aw.group)
	if len(got) != 2 || got[0] != want {
		t.Fatalf("after the removal from the group: %q\nwant first %q", got, want)
	}
	if got[1] == "third: served" {
		t.Fatal("the connection was still served after the refusal")
	}
	// Its own account, from a new connection, is refused at accept too.
	code, _, e := aw.runAs(t, aw.member, []uint32{aw.gid}, "approvals", "list", "--socket", aw.Approvals, "--host-account", "root")
	if code != cli.ExitFailure || !strings.Contains(e, "is not in the approvers group "+aw.group) {
		t.Fatalf("a new connection after the removal: exit %d %q", code, e)
	}
}

// TestApproverNeverAnswersItsOwnAsk is the attacker's self-approval: an
// account in both the agents' and the approvers' group raises an ask (its
// session's uid is the dispatch's AgentUID) and answers it from its own
// account on the approvals socket: refused with one line, nothing
// journaled, the ask still pending; another approver's answer is taken.
// An advisor session of the same account is refused alike, by uid even
// under another agent name.
func TestApproverNeverAnswersItsOwnAsk(t *testing.T) {
	aw := newApproversWorld(t)
	cl := aw.Dial(t)
	own := fmt.Sprintf("uid:%d", aw.member.UID)
	d := hosttest.Calc(t, "at-own", "alice", "conv-own")
	d.AgentUID = own
	k := hosttest.WantAwaiting(t, peertest.Call(t, cl, d)).ID
	sock := []string{"--socket", aw.Approvals, "--host-account", "root"}
	answersBefore := journalKinds(t, aw, hostlog.KindAskAnswer)
	code, out, errs := aw.runAs(t, aw.member, []uint32{aw.gid}, append([]string{"approvals", "respond", k, "--approve"}, sock...)...)
	want := fmt.Sprintf("steward-operator approvals respond: refused: %s raised ask %s: an approver never answers an ask of its own account\n", own, k)
	if code != cli.ExitRefused || errs != want || out != "" {
		t.Fatalf("answering its own ask: exit %d %q %q\nwant %q", code, out, errs, want)
	}
	// An advisor session of the same account, under any agent name.
	for _, advisor := range []string{"rev", "alice"} {
		r := aw.HostStore().Advise("ctl", msg.Advise{Advisor: advisor, Ask: k, Verdict: msg.VerdictApprove, Sentence: "fine", AdvisorUID: own})
		if r.Refused == nil || r.Refused.Code != msg.CodeApprovals || r.Refused.Reason != "an advisor never answers an ask raised by its own identity" {
			t.Fatalf("advisor %s of the asking account: %+v", advisor, r.Refused)
		}
	}
	if n := journalKinds(t, aw, hostlog.KindAskAnswer); n != answersBefore {
		t.Fatalf("the refused answers journaled %d ask-answer records", n-answersBefore)
	}
	if v, err := aw.HostStore().AskShow(k); err != nil || v.State != msg.AskPending {
		t.Fatalf("the ask after the refused answers: %+v %v", v, err)
	}
	// The host's own account (another approver) answers it.
	code, out, errs = hosttest.RunCLI(append([]string{"approvals", "respond", k, "--deny"}, sock...)...)
	if code != 0 || decodeAsk(t, out).State != msg.AskDenied {
		t.Fatalf("another approver: exit %d %q %q", code, out, errs)
	}
}

// journalKinds counts the records of kind in the serving host's journal.
func journalKinds(t *testing.T, aw *approversWorld, kind string) int {
	t.Helper()
	return hosttest.Kinds(t, aw.Store)[kind]
}
