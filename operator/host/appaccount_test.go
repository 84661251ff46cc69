package host_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/internal/testaccount"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// notServedByAccount is what the agent is told of an application socket
// that fails the account check: no path, no account, no uid.
const notServedByAccount = "the host refused the application's socket: it is not served by the route's application account; nothing was sent"

// reviseRoute registers a new revision of the world's route r1 (routes are
// immutable) with upstream and the application account.
func reviseRoute(t *testing.T, w *hosttest.World, upstream, account string) {
	t.Helper()
	w.WithStore(t, func(s *operator.Store) {
		revs, err := s.Route("r1")
		if err != nil {
			t.Fatal(err)
		}
		req := w.Route
		req.Upstream, req.AppAccount, req.Replaces = upstream, account, revs[len(revs)-1].ID
		v, err := s.RegisterRoute("r1", "app", req)
		if err != nil {
			t.Fatal(err)
		}
		if v.AppAccount != account || v.Revision != uint64(len(revs)+1) {
			t.Fatalf("route %+v", v)
		}
	})
	w.Route.Upstream, w.Route.AppAccount = upstream, account
}

// wantNotSentByAccount checks a dispatch refused by the account check:
// not sent, with the one line the agent may see, nothing charged.
func wantNotSentByAccount(t *testing.T, res msg.DispatchResult) {
	t.Helper()
	if res.Outcome != msg.StateNotSent || res.Detail != notServedByAccount {
		t.Fatalf("want not-sent %q, got %+v", notServedByAccount, res)
	}
	peertest.WantNoInternals(t, res.Detail)
}

// TestAppAccountChecked, as whoever runs the tests: a route naming the
// account that serves the socket delivers; the same socket reached through
// a symlinked directory, and a route naming an account that does not exist,
// end not-sent before a byte is written, saying so in one line without the
// path, with nothing charged. The host's log names the path and the cause.
func TestAppAccountChecked(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 5})
	reviseRoute(t, w, w.Route.Upstream, me.Username)
	var logs hosttest.SyncBuffer
	w.Log = slog.New(slog.NewTextHandler(&logs, nil))
	w.Serve(t)
	cl := w.Dial(t)
	if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "ok1", "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite || res.Status != 200 {
		t.Fatalf("ok1: %+v", res)
	}
	w.Stop()
	if strings.Contains(logs.String(), "dialled unchecked") {
		t.Fatalf("a route with an account was logged unchecked:\n%s", logs.String())
	}

	link := filepath.Join(w.Dir, "link")
	if err := os.Symlink(w.Dir, link); err != nil {
		t.Fatal(err)
	}
	reviseRoute(t, w, filepath.Join(link, "app.sock"), me.Username)
	w.Serve(t)
	cl = w.Dial(t)
	wantNotSentByAccount(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "sym1", "calc.evaluate", `{"expression":"1+1"}`)))
	w.Stop()
	if !strings.Contains(logs.String(), "ancestor "+link+" is a symlink") {
		t.Fatalf("the host's log does not say why:\n%s", logs.String())
	}

	stem, err := testaccount.NextStem()
	if err != nil {
		t.Fatal(err)
	}
	nobody := stem + "none" // an account of this run's stem that is never made
	reviseRoute(t, w, filepath.Join(w.Dir, "app.sock"), nobody)
	w.Serve(t)
	cl = w.Dial(t)
	wantNotSentByAccount(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "gone1", "calc.evaluate", `{"expression":"1+1"}`)))
	w.Stop()
	if !strings.Contains(logs.String(), "application account "+nobody) {
		t.Fatalf("the host's log does not name the account:\n%s", logs.String())
	}
	if got := w.App.Calls.Load(); got != 1 {
		t.Fatalf("the application was called %d times, want 1 (ok1)", got)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Charged != 5 || p.Balance != 5 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// TestAppAccountUncheckedWarnsOnce: a route without an account is dialled
// as before, and the host says once, when it loads the route, that it is
// unchecked.
func TestAppAccountUncheckedWarnsOnce(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10})
	var logs hosttest.SyncBuffer
	w.Log = slog.New(slog.NewTextHandler(&logs, nil))
	w.Serve(t)
	cl := w.Dial(t)
	for _, id := range []string{"u1", "u2"} {
		if res := peertest.Call(t, cl, peertest.InvokeDispatch(t, id, "calc.evaluate", `{"expression":"1+1"}`)); res.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	w.Stop()
	if n := strings.Count(logs.String(), "route names no application account"); n != 1 {
		t.Fatalf("the unchecked route was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestAppAccountRouteField: route register refuses an account name that
// no account could have, and a REQUEST.json carries the field.
func TestAppAccountRouteField(t *testing.T) {
	w := hosttest.NewWorld(t, hosttest.Opts{NoApp: true, NoGrant: true})
	// The account is checked as a revision of r1 is registered: a refused
	// one journals nothing, an allowed one is the route's next revision.
	const maxAppAccount = 32 // the longest account name useradd accepts
	w.WithStore(t, func(s *operator.Store) {
		register := func(account string) error {
			revs, err := s.Route("r1")
			if err != nil {
				t.Fatal(err)
			}
			req := w.Route
			req.AppAccount, req.Replaces = account, revs[len(revs)-1].ID
			_, err = s.RegisterRoute("r1", "app", req)
			return err
		}
		for _, c := range []struct{ name, want string }{
			{"1000", `route r1: application account "1000": only A-Za-z0-9._- allowed, first a letter or '_'`},
			{"-app", `route r1: application account "-app": only A-Za-z0-9._- allowed, first a letter or '_'`},
			{"a/b", `route r1: application account "a/b": only A-Za-z0-9._- allowed, first a letter or '_'`},
			{strings.Repeat("a", maxAppAccount+1), `route r1: application account "` + strings.Repeat("a", maxAppAccount+1) + `": must be 1 to 32 bytes`},
		} {
			if err := register(c.name); err == nil || err.Error() != "refused: "+c.want {
				t.Errorf("%q: %v, want %s", c.name, err, c.want)
			}
		}
		for _, ok := range []string{"", "steward-app", "_app", strings.Repeat("a", maxAppAccount), "a.b-c_9"} {
			if err := register(ok); err != nil {
				t.Errorf("%q: %v", ok, err)
			}
		}
		if revs, err := s.Route("r1"); err != nil || len(revs) != 6 {
			t.Fatalf("r1 has %d revisions (%v), want 6: the first and the five allowed", len(revs), err)
		}
		req := w.Route
		req.AppAccount, req.Replaces = "1000", ""
		if _, err := s.RegisterRoute("r2", "app2", req); err == nil || !strings.Contains(err.Error(), `application account "1000"`) {
			t.Fatalf("register with account 1000: %v", err)
		}
	})
	req, err := views.ParseRouteRequest([]byte(`{"controller":"ctl","upstream":"/run/a/app.sock","forward":"/run/f.sock","reverse":"/run/r.sock","prefix":"/v1","timeouts":{"connectMs":1,"responseMs":1},"appAccount":"steward-app"}`))
	if err != nil || req.AppAccount != "steward-app" {
		t.Fatalf("%+v %v", req, err)
	}
}

// TestAppAccountWrongAccount, as root with two test accounts: the
// application's socket served by account A (a child process of A's) is
// delivered to when the route names A; a route naming B refuses it, both
// when the socket file is A's (the owner check) and when root has made the
// file B's under a root directory, so only SO_PEERCRED tells (the peer
// check). Nothing reaches the application then.
func TestAppAccountWrongAccount(t *testing.T) {
	a := testaccount.New(t, "appa")
	b := testaccount.New(t, "appb")
	w := hosttest.NewWorld(t, hosttest.Opts{Fund: 10, Price: 5, NoApp: true})
	var logs hosttest.SyncBuffer
	w.Log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := os.Chmod(w.Dir, 0o711); err != nil {
		t.Fatal(err)
	}
	appDir := filepath.Join(w.Dir, "app")
	if err := os.Mkdir(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(appDir, int(a.UID), int(a.GID)); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(appDir, "app.sock")
	served := serveAppAs(t, w.Dir, sock, a)

	reviseRoute(t, w, sock, a.Name)
	w.Serve(t)
	cl := w.Dial(t)
	res := peertest.Call(t, cl, peertest.InvokeDispatch(t, "right1", "calc.evaluate", `{"expression":"1+1"}`))
	if res.Outcome != msg.StateDefinite || res.Status != 200 || string(res.Body) != `{"servedBy":"`+fmt.Sprint(a.UID)+`"}` {
		t.Fatalf("right1: %+v", res)
	}
	w.Stop()

	reviseRoute(t, w, sock, b.Name)
	w.Serve(t)
	cl = w.Dial(t)
	wantNotSentByAccount(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "owner1", "calc.evaluate", `{"expression":"1+1"}`)))
	if want := fmt.Sprintf("socket is owned by uid %d, want uid %d", a.UID, b.UID); !strings.Contains(logs.String(), want) {
		t.Fatalf("the host's log does not say %q:\n%s", want, logs.String())
	}
	// The file is B's, in a directory of root's: the listener is still A.
	if err := os.Chown(appDir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(sock, int(b.UID), int(b.GID)); err != nil {
		t.Fatal(err)
	}
	wantNotSentByAccount(t, peertest.Call(t, cl, peertest.InvokeDispatch(t, "peer1", "calc.evaluate", `{"expression":"1+1"}`)))
	w.Stop()
	if want := fmt.Sprintf("listener is uid %d", a.UID); !strings.Contains(logs.String(), want) {
		t.Fatalf("the host's log does not say %q:\n%s", want, logs.String())
	}
	if n := served(); n != 1 {
		t.Fatalf("the application served %d requests, want 1 (right1)", n)
	}
	w.WithStore(t, func(s *operator.Store) {
		if p, _ := s.PurseShow("ctl"); p.Charged != 5 || p.Balance != 5 {
			t.Fatalf("purse %+v", p)
		}
	})
}

// serveAppAs runs this test binary as account a, serving an application
// on sock (TestHelperServeApp), and returns once it listens; served stops
// it and says how many requests it answered.
func serveAppAs(t *testing.T, dir, sock string, a testaccount.Account) (served func() int) {
	t.Helper()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "app-helper.test")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper, "-test.run=^TestHelperServeApp$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "OPERATOR_HELPER_APP="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.UID, Gid: a.GID}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr hosttest.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "listening" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the application helper did not listen: %q %s", out.Text(), stderr.String())
	}
	var n int
	done := false
	served = func() int {
		if !done {
			done = true
			stdin.Close() // the helper ends when its stdin does
			if out.Scan() {
				fmt.Sscanf(out.Text(), "served %d", &n)
			}
			cmd.Wait()
		}
		return n
	}
	t.Cleanup(func() { served() })
	return served
}

// TestHelperServeApp runs as the application's account: it serves
// OPERATOR_HELPER_APP, answering every request 200 with its uid, until its
// stdin ends, then prints how many it served.
func TestHelperServeApp(t *testing.T) {
	sock := os.Getenv("OPERATOR_HELPER_APP")
	if sock == "" {
		t.Skip("helper process only")
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	n := make(chan struct{}, 64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n <- struct{}{}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"servedBy":"%d"}`, os.Getuid())
	})}
	go srv.Serve(l)
	fmt.Println("listening")
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			break
		}
	}
	srv.Close()
	fmt.Printf("served %d\n", len(n))
	os.Exit(0)
}
