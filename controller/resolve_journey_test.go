package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

var (
	opBuild    sync.Once
	opBuildErr error
)

// operatorBin builds steward-operator beside the test's steward-controller
// (TestMain removes that directory).
func operatorBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(controllerBin(t)), "steward-operator")
	opBuild.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, "github.com/stewardrt/steward/cmd/steward-operator").CombinedOutput()
		if err != nil {
			opBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if opBuildErr != nil {
		t.Fatal(opBuildErr)
	}
	return bin
}

// hostProc is `steward-operator serve` as its own process, so that a
// failpoint can kill it with SIGKILL.
type hostProc struct {
	cmd  *exec.Cmd
	done chan error
}

// startHostProc stops the stack's in-process host if it runs and starts
// the host as a process with failpoint fp armed ("" for none), waiting
// for READY=1 on a real sd_notify socket.
func (s *stack) startHostProc(fp string) *hostProc {
	s.t.Helper()
	if s.stopHost != nil {
		s.stopHost()
		if err := <-s.hostDone; err != nil {
			s.t.Fatalf("host: %v", err)
		}
		s.stopHost = nil
	}
	nsPath := filepath.Join(s.dir, fmt.Sprintf("n%d.sock", time.Now().UnixNano()%1e6))
	ns, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsPath, Net: "unixgram"})
	if err != nil {
		s.t.Fatal(err)
	}
	defer ns.Close()
	h := &hostProc{cmd: exec.Command(operatorBin(s.t), "serve", "--store", s.store), done: make(chan error, 1)}
	h.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+nsPath, failpoint.Env+"="+fp)
	if testing.Verbose() {
		h.cmd.Stderr = os.Stderr
	}
	if err := h.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	s.t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			h.cmd.Process.Kill()
			<-h.done
		}
	})
	buf := make([]byte, 4096)
	ns.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, err := ns.Read(buf)
		if err != nil {
			s.t.Fatalf("the host sent no READY=1: %v", err)
		}
		if strings.Contains(string(buf[:n]), "READY=1") {
			return h
		}
	}
}

// killed waits for the host to die of SIGKILL at its failpoint.
func (h *hostProc) killed(t *testing.T) {
	t.Helper()
	select {
	case err := <-h.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("host exit %v, want SIGKILL", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the host did not reach its failpoint")
	}
}

// operatorCmd runs steward-operator as the operator would, returning its
// exit code and output.
func (s *stack) operatorCmd(args ...string) (int, string) {
	s.t.Helper()
	cmd := exec.Command(operatorBin(s.t), append(args, "--store", s.store)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return 0, string(out)
}

// applianceAnswers counts the answer records in the appliance's own
// journal: one per request it ran.
func (s *stack) applianceAnswers() int {
	s.t.Helper()
	j, err := journal.Open(filepath.Join(s.dir, "app-state", "journal"), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	n := 0
	if err := j.Iterate(1, func(r journal.Record) error {
		if r.Kind == "answer" {
			n++
		}
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// TestResolutionJourneys: the host is killed by SIGKILL while delivering
// a call; after its restart the agent's requestId is refused while the
// attempt is uncertain, naming the operator's command; the operator
// resolves it on the host with steward-operator (redeliver, release or
// charge); the controller learns it by asking the host, either when the
// agent calls again or by its own attempts resolve, and the agent's
// requestId answers accordingly. Nothing is charged twice, the host's
// receipts verify, and no attempt is left to block enrollment. A
// redelivery of a request the application had already run is answered
// from the application's journal: it ran once.
func TestResolutionJourneys(t *testing.T) {
	cases := []struct {
		name, fp, action string
		learn            string // "agent" or "controller"
		charged          uint64 // of price 7
		answers          int    // the appliance's answer records at the end
	}{
		{"redeliver", operator.FailAfterMarkSend, "redeliver", "agent", 7, 1},
		{"redeliver-answered-from-the-application-journal", operator.FailAfterSend, "redeliver", "controller", 7, 1},
		{"release", operator.FailAfterMarkSend, "release", "agent", 0, 0},
		{"charge", operator.FailAfterMarkSend, "charge", "controller", 7, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A host killed after its send races the appliance, which skips
			// a request whose client is gone: a relay reads the answer to
			// its end, so that the appliance has run it when the host dies.
			relay := tc.fp == operator.FailAfterSend
			s := newStack(t, stackOpts{price: 7, funded: 100, noApp: relay})
			var answered <-chan struct{}
			if relay {
				answered = relayAppliance(t, s.appSock, filepath.Join(s.dir, "app-state"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			h := s.startHostProc(tc.fp)
			s.startController()
			cs := s.client(ctx)
			args := callArgs("resolve-1", map[string]any{"text": "once"})
			r, _ := call(t, ctx, cs, ToolCall, args)
			if r.Outcome != msg.StateUncertain || r.AttemptID == "" {
				t.Fatalf("the call through a dying host: %+v", r)
			}
			id := r.AttemptID
			h.killed(t)
			if relay {
				select {
				case <-answered:
				case <-ctx.Done():
					t.Fatal("the appliance never answered the request the host sent before its death")
				}
			}
			ranBefore := s.applianceAnswers()
			h = s.startHostProc("")

			r, res := call(t, ctx, cs, ToolCall, args)
			if !res.IsError || r.Refusal == nil || r.Refusal.Code != msg.CodeUncertain ||
				!strings.Contains(r.Refusal.Reason, "steward-operator attempts resolve "+id+" --redeliver|--release|--charge --reason TEXT") {
				t.Fatalf("while uncertain: %+v", r)
			}
			reason := "checked the application after the crash"
			if code, out := s.operatorCmd("attempts", "resolve", id, "--"+tc.action, "--reason", reason); code != 0 {
				t.Fatalf("steward-operator attempts resolve: exit %d: %s", code, out)
			}
			if tc.learn == "controller" {
				ins, err := ResolveAttempt(ctx, s.cfgPath, id, nil)
				if err != nil || ins.Resolved != map[string]msg.State{"redeliver": msg.StateDefinite, "charge": msg.StatePerformed}[tc.action] {
					t.Fatalf("controller attempts resolve: %v %+v", err, ins)
				}
			}
			r, res = call(t, ctx, cs, ToolCall, args)
			switch tc.action {
			case "redeliver":
				if res.IsError || r.Outcome != msg.StateDefinite || r.Status != 200 || r.AttemptID != id || len(r.Body) == 0 {
					t.Fatalf("after the redelivery: %+v", r)
				}
			case "release":
				if !res.IsError || r.Refusal == nil || r.Refusal.Code != CodeReleased ||
					r.Refusal.Reason != "released by the operator: "+reason+"; nothing was charged" {
					t.Fatalf("after the release: %+v", r)
				}
			case "charge":
				if !res.IsError || r.Outcome != msg.StatePerformed || r.Charge == nil || *r.Charge != 7 ||
					!strings.Contains(r.Detail, "performed and charged 7 by the operator's word (uid:") || !strings.Contains(r.Detail, "its answer was never recorded") {
					t.Fatalf("after the charge: %+v", r)
				}
			}
			// The same answer again, from the controller's journal.
			again, _ := call(t, ctx, cs, ToolCall, args)
			if tc.action == "release" && (again.Refusal == nil || again.Refusal.Code != CodeReleased) || tc.action != "release" && again.AttemptID != id {
				t.Fatalf("asked again: %+v", again)
			}
			if list, err := ListAttempts(s.cfgPath); err != nil || len(list) != 0 {
				t.Fatalf("unresolved attempts left (they would block enrollment): %+v %v", list, err)
			}
			if p := s.purse(); p.Charged != tc.charged || p.Balance != 100-tc.charged {
				t.Fatalf("purse %+v, want charged %d once", p, tc.charged)
			}
			if n := s.applianceAnswers(); n != tc.answers || (tc.fp == operator.FailAfterSend && ranBefore != 1) {
				t.Fatalf("the appliance journaled %d answers (%d before the redelivery), want %d: it runs a request once", n, ranBefore, tc.answers)
			}
			if tc.fp == operator.FailAfterSend {
				s.checkAnsweredFromJournal(id)
			}
			rep, err := audit.VerifyStore(s.store)
			if err != nil || rep.Receipts != 1 || len(rep.Findings) != 0 {
				t.Fatalf("receipts verify: %+v %v", rep, err)
			}
			s.stopController()
			h.cmd.Process.Signal(syscall.SIGTERM)
			<-h.done
		})
	}
}

// checkAnsweredFromJournal checks that the host's redelivered answer of
// attempt id is the response the appliance journaled when it first ran it.
func (s *stack) checkAnsweredFromJournal(id string) {
	s.t.Helper()
	var recorded []byte
	j, err := journal.Open(filepath.Join(s.dir, "app-state", "journal"), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer j.Close()
	j.Iterate(1, func(r journal.Record) error {
		if r.Kind == "answer" {
			var a struct {
				RequestID  string `cbor:"requestId"`
				BodySHA256 []byte `cbor:"bodySha256"`
				Status     int    `cbor:"status"`
				Response   []byte `cbor:"response"`
			}
			if err := wire.Unmarshal(r.Body, &a); err != nil {
				s.t.Fatal(err)
			}
			recorded = a.Response
		}
		return nil
	})
	cj, err := journal.Open(s.cfg.JournalDir(), journal.Options{ReadOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	defer cj.Close()
	receipts, _, err := ledger.Receipts(cj)
	if err != nil {
		s.t.Fatal(err)
	}
	rc, err := msg.VerifyReceipt(receipts[id], s.hostRing())
	if err != nil {
		s.t.Fatal(err)
	}
	sum := sha256.Sum256(recorded)
	if recorded == nil || !bytes.Equal(rc.ResponseSHA256, sum[:]) {
		s.t.Fatalf("the redelivered answer is not the one the appliance journaled (%d bytes)", len(recorded))
	}
}

// hostRing is the host's receipt key, from the store's public key.
func (s *stack) hostRing() *wire.Keyring {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.store, "operator.pub"))
	if err != nil {
		s.t.Fatal(err)
	}
	pub, err := wire.ParseHybridPublicKey(b)
	if err != nil {
		s.t.Fatal(err)
	}
	return wire.NewKeyring(pub.Ed25519())
}
