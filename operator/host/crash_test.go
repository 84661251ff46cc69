package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/operator/cli"
	"github.com/stewardrt/steward/operator/hostlog"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

func TestCrashAtFailpoints(t *testing.T) {
	cases := []struct {
		fp        string
		state     msg.State
		delivered int64
	}{
		{operator.FailAfterReserve, msg.StateUncertain, 0},
		{operator.FailAfterMarkSend, msg.StateUncertain, 0},
		{operator.FailAfterSend, msg.StateUncertain, 1},
		{operator.FailAfterOutcome, msg.StateDefinite, 1},
	}
	for _, tc := range cases {
		t.Run(tc.fp, func(t *testing.T) {
			w := hosttest.NewWorld(t, hosttest.Opts{Fund: 100, Price: 5})
			c := hosttest.StartChild(t, w.Store, tc.fp)
			cl := w.Dial(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := cl.Call(ctx, msg.TypeDispatch, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
			cancel()
			if err == nil {
				t.Fatal("the dispatch was answered; the host should have died")
			}
			if ws := c.WaitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child exit %v, want SIGKILL at %s; stderr: %s", ws, tc.fp, c.Stderr.String())
			}
			if got := w.App.Calls.Load(); got != tc.delivered {
				t.Fatalf("the application saw %d requests, want %d", got, tc.delivered)
			}
			c = hosttest.StartChild(t, w.Store, "")
			cl = w.Dial(t)
			in := peertest.Inspect(t, cl, "a1")
			if in.State != tc.state {
				t.Fatalf("after %s: state %s (%s), want %s", tc.fp, in.State, in.Detail, tc.state)
			}
			if tc.state == msg.StateDefinite {
				r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.Pub.Ed25519()))
				if err != nil || r.Charge != 5 || r.BalanceAfter != 95 || in.Status != 200 {
					t.Fatalf("receipt %+v %v", r, err)
				}
			}
			// never delivered twice, and nothing retried
			res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
			peertest.WantRefusal(t, res, msg.CodeDuplicate, "never delivered twice")
			if got := w.App.Calls.Load(); got != tc.delivered {
				t.Fatalf("after restart the application saw %d requests, want %d", got, tc.delivered)
			}
			c.Stop(t)
			w.WithStore(t, func(s *operator.Store) {
				p, _ := s.PurseShow("ctl")
				if p.Charged != 5 || p.Balance != 95 {
					t.Fatalf("purse %+v: want charged exactly once, reservation kept", p)
				}
				// an uncertain attempt keeps its charge with no receipt:
				// verify lists it as a finding, naming the charge held
				rep, err := audit.VerifyStore(w.Store)
				want := 0
				if tc.state == msg.StateDefinite {
					want = 1
					if err != nil {
						t.Fatal(err)
					}
				} else if !errors.Is(err, hostlog.ErrReceiptFault) || len(rep.Findings) != 1 ||
					!strings.Contains(rep.Findings[0], "reservation of attempt a1 (journal record ") ||
					!strings.Contains(rep.Findings[0], "5 charged without a receipt, still held") {
					t.Fatalf("uncertain attempt: findings %q, err %v; want it held without a receipt", rep.Findings, err)
				}
				if rep.Receipts != want {
					t.Fatalf("%d receipts, want %d", rep.Receipts, want)
				}
			})
		})
	}
}

func TestAdminCommandsWhileServing(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	c := hosttest.StartChild(t, w.Store, "")
	var out, errb bytes.Buffer
	op := &cli.CLI{Stdout: &out, Stderr: &errb}
	if code := op.Main([]string{"purse", "freeze", "ctl", "--store", w.Store}); code != 0 {
		t.Fatalf("freeze: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "FROZEN") {
		t.Fatalf("freeze output %q", out.String())
	}
	cl := w.Dial(t)
	peertest.WantRefusal(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "x1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeFrozen, "frozen")
	errb.Reset()
	if code := op.Main([]string{"purse", "fund", "nobody", "5", "--store", w.Store}); code != cli.ExitRefused || !strings.Contains(errb.String(), "no controller named nobody") {
		t.Fatalf("fund unknown: %d %q", code, errb.String())
	}
	out.Reset()
	if code := op.Main([]string{"purse", "show", "ctl", "--store", w.Store, "--json"}); code != 0 || !strings.Contains(out.String(), `"frozen": true`) {
		t.Fatalf("show: %q", out.String())
	}
	c.Stop(t)
}

// TestWrongUIDPeer: a peer whose UID is not the controller's pinned UID
// is refused with a signed frame that says so.
func TestWrongUIDPeer(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 1})
	w.Serve(t)
	uid, out := dialAsOtherAccount(t, w, w.Route.Forward)
	if !strings.Contains(out, "refused") || !strings.Contains(out, fmt.Sprintf("peer uid %d is not controller ctl's uid 0", uid)) {
		t.Fatalf("helper output: %s", out)
	}
}

// dialAsOtherAccount dials the socket at path of the running world from a
// second OS account (TestHelperDial in a child process) and returns that
// account's uid and what the host answered.
func dialAsOtherAccount(t *testing.T, w *hosttest.World, path string) (uint32, string) {
	uid, gid := testaccount.Peer(t)
	// Let the second account reach the socket: the design gives the
	// controller's group access; here the test account's group.
	if err := os.Chmod(w.Dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 0, int(gid)); err != nil {
		t.Fatal(err)
	}
	// The test binary lives in a root-only build dir: copy it where the
	// second account can run it.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(w.Dir, "helper.test")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper, "-test.run=^TestHelperDial$", "-test.v")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "OPERATOR_HELPER_DIAL="+path, "OPERATOR_HELPER_HOSTKEY="+hex.EncodeToString(w.Pub.MarshalCOSEKey()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("helper: %v", err)
	}
	return uid, string(out)
}

// TestHelperDial runs in the second account: it dials and prints what the
// host answered.
func TestHelperDial(t *testing.T) {
	path := os.Getenv("OPERATOR_HELPER_DIAL")
	if path == "" {
		t.Skip("helper process only")
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	// The listener refuses on accept, before any hello: read its frame.
	kb, _ := hex.DecodeString(os.Getenv("OPERATOR_HELPER_HOSTKEY"))
	pub, err := wire.ParseHybridPublicKey(kb)
	if err != nil {
		fmt.Println("host key:", err)
		return
	}
	frame, err := wire.ReadFrame(bufio.NewReader(conn), wire.MaxReplyFrame)
	if err != nil {
		fmt.Println("read:", err)
		return
	}
	payload, _, err := wire.Verify1(frame, wire.NewKeyring(pub.Ed25519()))
	if err != nil {
		fmt.Println("verify:", err)
		return
	}
	var env wire.Envelope
	if err := wire.Unmarshal(payload, &env); err != nil {
		fmt.Println("envelope:", err)
		return
	}
	var body struct {
		Reason string `cbor:"reason"`
	}
	env.Decode(&body)
	fmt.Printf("%s: %s\n", env.T, body.Reason)
}
