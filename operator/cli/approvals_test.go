package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/wire/msg"
)

// askOutput is an ask as the approvals verbs print it.
type askOutput struct {
	msg.AskView
	Arguments json.RawMessage `json:"arguments"`
}

// compactJSON is raw without the indentation the verbs print it with.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid: " + err.Error()
	}
	return b.String()
}

func decodeAsk(t *testing.T, out string) askOutput {
	t.Helper()
	var a askOutput
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("ask JSON: %v: %q", err, out)
	}
	return a
}

// TestApprovalsCommands: as the host's account, through the running
// host's admin socket, list, show and respond read and answer the asks;
// the first answer wins and is recorded as the socket peer's uid and
// account; an unknown ask, a second answer and a bad flag are refused
// with one line and exit 2.
func TestApprovalsCommands(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 4})
	aliceAsk, bobAsk := hosttest.RaiseAsks(t, w)
	conn := []string{"--store", w.Store}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return hosttest.RunCLI(append(append([]string{"approvals"}, args...), conn...)...)
	}
	code, out, errs := run("list", "--json")
	var listed []askOutput
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 2 || listed[0].ID != aliceAsk ||
		listed[1].ID != bobAsk || compactJSON(listed[0].Arguments) != `{"expression":"1+1"}` || listed[0].State != msg.AskPending {
		t.Fatalf("list --json: %d %v %q %q", code, err, out, errs)
	}
	if code, out, _ := run("list"); code != 0 || strings.Count(out, "\n") != 2 ||
		!strings.HasPrefix(out, aliceAsk+"\tpending\tctl/alice\tapp/calc.evaluate\tprice 4\texpires ") {
		t.Fatalf("list: %d %q", code, out)
	}
	if code, out, _ := run("show", bobAsk); code != 0 || decodeAsk(t, out).ID != bobAsk || decodeAsk(t, out).Agent != "bob" {
		t.Fatalf("show: %d %q", code, out)
	}
	code, out, errs = run("respond", aliceAsk, "--approve", "--note", "fine by me")
	a := decodeAsk(t, out)
	me := fmt.Sprintf("uid:%d", os.Geteuid())
	if code != 0 || a.State != msg.AskApproved || a.AnsweredBy != me || a.Note != "fine by me" || compactJSON(a.Arguments) != `{"expression":"1+1"}` {
		t.Fatalf("respond: %d %q %q", code, out, errs)
	}
	account := admin.AccountName(uint32(os.Geteuid()))
	second := fmt.Sprintf("steward-operator approvals respond: refused: ask %s was already answered: approved by %s (%s) at %s\n",
		aliceAsk, me, account, time.UnixMilli(a.AnsweredAt).UTC().Format(time.RFC3339))
	long := strings.Repeat("n", msg.MaxApprovalNote+1)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"respond", aliceAsk, "--deny"}, second},
		{[]string{"respond", "ask-000000000000", "--deny"}, "steward-operator approvals respond: refused: no ask ask-000000000000\n"},
		{[]string{"show", "ask-nope"}, "steward-operator approvals show: refused: no ask ask-nope\n"},
		{[]string{"respond", bobAsk}, "steward-operator approvals respond: usage: exactly one of --approve and --deny is required\n"},
		{[]string{"respond", bobAsk, "--approve", "--deny"}, "steward-operator approvals respond: usage: exactly one of --approve and --deny is required\n"},
		{[]string{"respond", bobAsk, "--deny", "--note", long}, "steward-operator approvals respond: refused: the note of 513 bytes is over the bound of 512\n"},
		{[]string{"respond", bobAsk, "--deny", "--note", "two\nlines"}, "steward-operator approvals respond: refused: the note must be one line\n"},
		{[]string{"list", "--socket", "/run/x.sock"}, "steward-operator approvals list: usage: give --store DIR (the host's account) or --socket PATH (an approver), not both\n"},
		{[]string{"list", "--bogus"}, ""},
	} {
		code, _, errs := run(c.args...)
		if code != cli.ExitRefused || (c.want != "" && errs != c.want) {
			t.Errorf("%v: exit %d %q; want 2 %q", c.args, code, errs, c.want)
		}
	}
	// At the note's bound: taken.
	if code, out, errs := run("respond", bobAsk, "--deny", "--note", long[:msg.MaxApprovalNote]); code != 0 || decodeAsk(t, out).State != msg.AskDenied {
		t.Fatalf("deny at the note's bound: %d %q", code, errs)
	}
	if code, out, _ := run("list", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after the answers: %q", out)
	}
	if code, out, _ := run("list", "--all", "--json"); code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 ||
		listed[0].State != msg.AskApproved || listed[1].State != msg.AskDenied {
		t.Fatalf("list --all: %q", out)
	}
	w.Stop()
	// watch follows a running host; it never holds the store's lock.
	if code, _, errs := run("watch"); code != cli.ExitFailure || strings.Count(errs, "\n") != 1 ||
		!strings.HasPrefix(errs, "steward-operator approvals watch: no running host answered on "+admin.SocketPath(w.Store)+" (watch follows a running host): ") {
		t.Errorf("watch without a host: %d %q", code, errs)
	}
	// The answer's record names the answering account beside its uid.
	w.WithStore(t, func(s *operator.Store) {
		if v, err := s.AskShow(aliceAsk); err != nil || v.AnsweredBy != me {
			t.Fatalf("after a restart: %+v %v", v, err)
		}
	})
}

// TestApprovalsWatch: watch prints one JSON line per event, those the
// journal holds first, then each new one as it happens (the host's wait,
// no polling), and ends cleanly on an interrupt.
func TestApprovalsWatch(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 4})
	aliceAsk, bobAsk := hosttest.RaiseAsks(t, w)
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errb hosttest.SyncBuffer
	go func() {
		done <- (&cli.CLI{Stdout: pw, Stderr: &errb}).Main([]string{"approvals", "watch", "--store", w.Store})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	next := func() watchLineOut {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended: %v %s", lines.Err(), errb.String())
		}
		var l watchLineOut
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("watch line %q: %v", lines.Text(), err)
		}
		return l
	}
	for _, id := range []string{aliceAsk, bobAsk} {
		if l := next(); l.Event != "raised" || l.Ask.ID != id || l.At == 0 || compactJSON(l.Ask.Arguments) != `{"expression":"1+1"}` {
			t.Fatalf("raised line: %+v", l)
		}
	}
	// Answered while watch waits on the host: its line comes next.
	if code, _, errs := hosttest.RunCLI("approvals", "respond", bobAsk, "--deny", "--store", w.Store); code != 0 {
		t.Fatal(errs)
	}
	if l := next(); l.Event != "answered" || l.Ask.ID != bobAsk || l.Ask.State != msg.AskDenied {
		t.Fatalf("answered line: %+v", l)
	}
	// The first lines proved watch is running with its signal handler in place.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	if code := <-done; code != 0 {
		t.Fatalf("watch after the interrupt: exit %d %s", code, errb.String())
	}
}

// watchLineOut is a line of watch as a reader decodes it.
type watchLineOut struct {
	Event string    `json:"event"`
	At    int64     `json:"at"`
	Ask   askOutput `json:"ask"`
}

// TestApprovalsRespondEndToEnd: a marked call becomes an ask on the
// running host; `approvals respond` answers it through the admin socket,
// the verdict is pushed to the controller, and its collect goes on: the
// approved call delivered once with a receipt naming the ask and the
// answering uid, the denied one refused at charge 0; receipts verify
// finds nothing.
func TestApprovalsRespondEndToEnd(t *testing.T) {
	w, _ := hosttest.ApprovalWorld(t, &msg.ApprovalPolicy{})
	w.Serve(t)
	cl := w.Dial(t)
	me := fmt.Sprintf("uid:%d", os.Geteuid())
	yes := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a1", "alice", "c1")))
	no := hosttest.WantAwaiting(t, peertest.Call(t, cl, hosttest.Calc(t, "a2", "alice", "c1")))
	if code, _, errs := hosttest.RunCLI("approvals", "respond", yes.ID, "--approve", "--note", "go ahead", "--store", w.Store); code != 0 {
		t.Fatal(errs)
	}
	hosttest.WantPush(t, w.Peer, "a1", yes.ID, msg.AskApproved)
	res := hosttest.CollectCall(t, cl, "a1")
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); res.Outcome != msg.StateDefinite || r.Ask != yes.ID || r.AnsweredBy != me || r.Charge != 4 {
		t.Fatalf("approved: %s %+v", res.Outcome, r)
	}
	if code, _, errs := hosttest.RunCLI("approvals", "respond", no.ID, "--deny", "--note", "not today", "--store", w.Store); code != 0 {
		t.Fatal(errs)
	}
	hosttest.WantPush(t, w.Peer, "a2", no.ID, msg.AskDenied)
	res = hosttest.CollectCall(t, cl, "a2")
	if r := hosttest.VerifiedReceipt(t, w, res.Receipt); res.Refusal == nil || res.Refusal.Code != msg.CodeDenied || r.Ask != no.ID || r.AnsweredBy != me || r.Charge != 0 {
		t.Fatalf("denied: %s %+v %+v", res.Outcome, res.Refusal, r)
	}
	if w.App.Calls.Load() != 1 {
		t.Fatalf("delivered %d times", w.App.Calls.Load())
	}
	w.Stop()
	if rep, err := audit.VerifyStore(w.Store); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("verify %+v %v", rep.Findings, err)
	}
}
