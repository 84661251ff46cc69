package operator

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

	"github.com/stewardrt/steward/internal/testaccount"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// child is a `steward-operator serve` process: this test binary
// re-executed as the command (see TestMain), with a real sd_notify socket.
type child struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan error
	notify *net.UnixConn // NOTIFY_SOCKET, open until the test ends
}

// startChild runs serve on store with failpoint armed ("" for none) and env
// added, and waits for READY=1 on its sd_notify socket.
func startChild(t *testing.T, store, fp string, env ...string) *child {
	t.Helper()
	nsPath := filepath.Join(filepath.Dir(store), fmt.Sprintf("notify-%d.sock", time.Now().UnixNano()))
	ns, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c := &child{cmd: exec.Command(os.Args[0], "serve", "--store", store), done: make(chan error, 1), notify: ns}
	c.cmd.Env = append(os.Environ(), mainEnv+"=1", "NOTIFY_SOCKET="+nsPath, failpoint.Env+"="+fp)
	c.cmd.Env = append(c.cmd.Env, env...)
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	for {
		if m := c.nextNotify(t, 30*time.Second); strings.Contains(m, "READY=1") {
			return c
		}
	}
}

// nextNotify waits, at most timeout, for the child's next sd_notify message.
func (c *child) nextNotify(t *testing.T, timeout time.Duration) string {
	t.Helper()
	c.notify.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	n, err := c.notify.Read(buf)
	if err != nil {
		t.Fatalf("no notification from the child: %v; stderr: %s", err, c.stderr.String())
	}
	return string(buf[:n])
}

// waitExit waits for the child to exit and returns its wait status.
func (c *child) waitExit(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not exit; stderr: %s", c.stderr.String())
	}
	return c.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

func (c *child) stop(t *testing.T) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	if ws := c.waitExit(t); ws.ExitStatus() != 0 {
		t.Fatalf("child exit %v; stderr: %s", ws, c.stderr.String())
	}
}

func TestCrashAtFailpoints(t *testing.T) {
	cases := []struct {
		fp        string
		state     msg.State
		delivered int64
	}{
		{FailAfterReserve, msg.StateUncertain, 0},
		{FailAfterMarkSend, msg.StateUncertain, 0},
		{FailAfterSend, msg.StateUncertain, 1},
		{FailAfterOutcome, msg.StateDefinite, 1},
	}
	for _, tc := range cases {
		t.Run(tc.fp, func(t *testing.T) {
			w := newWorld(t, worldOpts{fund: 100, price: 5})
			c := startChild(t, w.store, tc.fp)
			cl := w.dial(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := cl.Call(ctx, msg.TypeDispatch, invokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
			cancel()
			if err == nil {
				t.Fatal("the dispatch was answered; the host should have died")
			}
			if ws := c.waitExit(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child exit %v, want SIGKILL at %s; stderr: %s", ws, tc.fp, c.stderr.String())
			}
			if got := w.app.calls.Load(); got != tc.delivered {
				t.Fatalf("the application saw %d requests, want %d", got, tc.delivered)
			}
			c = startChild(t, w.store, "")
			cl = w.dial(t)
			in := inspect(t, cl, "a1")
			if in.State != tc.state {
				t.Fatalf("after %s: state %s (%s), want %s", tc.fp, in.State, in.Detail, tc.state)
			}
			if tc.state == msg.StateDefinite {
				r, err := msg.VerifyReceipt(in.Receipt, wire.NewKeyring(w.pub.Ed25519()))
				if err != nil || r.Charge != 5 || r.BalanceAfter != 95 || in.Status != 200 {
					t.Fatalf("receipt %+v %v", r, err)
				}
			}
			// never delivered twice, and nothing retried
			res := call(t, cl, invokeDispatch(t, "a1", "calc.evaluate", `{"expression":"1+1"}`))
			wantRefusal(t, res, msg.CodeDuplicate, "never delivered twice")
			if got := w.app.calls.Load(); got != tc.delivered {
				t.Fatalf("after restart the application saw %d requests, want %d", got, tc.delivered)
			}
			c.stop(t)
			w.withStore(t, func(s *Store) {
				p, _ := s.PurseShow("ctl")
				if p.Charged != 5 || p.Balance != 95 {
					t.Fatalf("purse %+v: want charged exactly once, reservation kept", p)
				}
				// an uncertain attempt keeps its charge with no receipt:
				// verify lists it as a finding, naming the charge held
				rep, err := s.VerifyReceipts(1)
				want := 0
				if tc.state == msg.StateDefinite {
					want = 1
					if err != nil {
						t.Fatal(err)
					}
				} else if !errors.Is(err, ErrReceiptFault) || len(rep.Findings) != 1 ||
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
	w := newWorld(t, worldOpts{fund: 10, price: 1})
	c := startChild(t, w.store, "")
	var out, errb bytes.Buffer
	cli := &CLI{Stdout: &out, Stderr: &errb}
	if code := cli.Main([]string{"purse", "freeze", "ctl", "--store", w.store}); code != 0 {
		t.Fatalf("freeze: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "FROZEN") {
		t.Fatalf("freeze output %q", out.String())
	}
	cl := w.dial(t)
	wantRefusal(t, call(t, cl, invokeDispatch(t, "x1", "calc.evaluate", `{"expression":"1+1"}`)), msg.CodeFrozen, "frozen")
	errb.Reset()
	if code := cli.Main([]string{"purse", "fund", "nobody", "5", "--store", w.store}); code != ExitRefused || !strings.Contains(errb.String(), "no controller named nobody") {
		t.Fatalf("fund unknown: %d %q", code, errb.String())
	}
	out.Reset()
	if code := cli.Main([]string{"purse", "show", "ctl", "--store", w.store, "--json"}); code != 0 || !strings.Contains(out.String(), `"frozen": true`) {
		t.Fatalf("show: %q", out.String())
	}
	c.stop(t)
}

// TestWrongUIDPeer: a peer whose UID is not the controller's pinned UID
// is refused with a signed frame that says so.
func TestWrongUIDPeer(t *testing.T) {
	w := newWorld(t, worldOpts{fund: 10, price: 1})
	w.serve(t)
	uid, out := dialAsOtherAccount(t, w, w.route.Forward)
	if !strings.Contains(out, "refused") || !strings.Contains(out, fmt.Sprintf("peer uid %d is not controller ctl's uid 0", uid)) {
		t.Fatalf("helper output: %s", out)
	}
}

// dialAsOtherAccount dials the socket at path of the running world from a
// second OS account (TestHelperDial in a child process) and returns that
// account's uid and what the host answered.
func dialAsOtherAccount(t *testing.T, w *world, path string) (uint32, string) {
	uid, gid := testaccount.Peer(t)
	// Let the second account reach the socket: the design gives the
	// controller's group access; here the test account's group.
	if err := os.Chmod(w.dir, 0o711); err != nil {
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
	helper := filepath.Join(w.dir, "helper.test")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper, "-test.run=^TestHelperDial$", "-test.v")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "OPERATOR_HELPER_DIAL="+path, "OPERATOR_HELPER_HOSTKEY="+hex.EncodeToString(w.pub.MarshalCOSEKey()))
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
