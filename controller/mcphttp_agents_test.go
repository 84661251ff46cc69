package controller

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/internal/testaccount"
)

// dialAs connects to the Unix socket sock as uid and gid: on a thread
// whose effective ids (and so the connection's SO_PEERCRED, which the
// kernel takes at connect) are those for the connect alone, set with the
// raw per-thread system calls rather than the process-wide
// syscall.Setuid, then set back (the saved ids stay root's). A thread
// whose ids could not be set back is never given back to the runtime: its
// goroutine ends locked, so the thread exits with it. It needs root.
func dialAs(sock string, uid, gid uint32) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		euid, egid := uintptr(syscall.Geteuid()), uintptr(syscall.Getegid())
		keep := ^uintptr(0) // setres*id's "leave this one"
		restored := false
		restore := func() {
			if restored {
				return
			}
			restored = true
			_, _, e1 := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, euid, keep)
			_, _, e2 := syscall.RawSyscall(syscall.SYS_SETRESGID, keep, egid, keep)
			if e1 == 0 && e2 == 0 {
				runtime.UnlockOSThread()
			}
		}
		defer restore()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, keep, uintptr(gid), keep); e != 0 {
			ch <- result{err: fmt.Errorf("setresgid: %w", e)}
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
			ch <- result{err: fmt.Errorf("setresuid: %w", e)}
			return
		}
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
			syscall.Close(fd)
			ch <- result{err: fmt.Errorf("connect %s as uid %d: %w", sock, uid, err)}
			return
		}
		restore()
		f := os.NewFile(uintptr(fd), sock)
		c, err := net.FileConn(f)
		f.Close()
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// httpClientAs is an http.Client whose connections to sock are uid's.
func httpClientAs(sock string, a testaccount.Account) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return dialAs(sock, a.UID, a.GID) },
	}}
}

// TestMCPHTTPTwoAgents: two real accounts, configured as the agents alpha
// and beta, use the streamable HTTP socket. Each call's agent is its
// connection's SO_PEERCRED: alpha's receipt names alpha. beta naming
// alpha's session id (an oracle_call, a GET, a DELETE, and oracle_calls
// while beta opens sessions of its own at once) is refused 404 as for a
// session that is not open, logged at WARN with both agents and a prefix
// of the id, and nothing is journaled; alpha's session still works, and
// beta's own works as beta. An account not configured is refused at
// accept. The log holds no session id in full.
func TestMCPHTTPTwoAgents(t *testing.T) {
	group, _ := agentGroup(t)
	alpha := testaccount.New(t, "alpha", group)
	beta := testaccount.New(t, "beta", group)
	stranger := testaccount.New(t, "none", group)
	s := newStack(t, stackOpts{edit: func(m map[string]any) {
		withMCPHTTP(m)
		m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": []any{
			map[string]string{"name": "alpha", "account": alpha.Name},
			map[string]string{"name": "beta", "account": beta.Name},
		}}
	}})
	var lines logLines
	s.startControllerWith(Options{Logger: debugLog(&lines)})
	if err := os.Chmod(s.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	sock := s.cfg.Sockets.MCPHTTP
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(a testaccount.Account) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "steward-http-test", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: httpEndpoint, HTTPClient: httpClientAs(sock, a), MaxRetries: -1}, nil)
		if err == nil {
			t.Cleanup(func() { cs.Close() })
		}
		return cs, err
	}

	if _, err := connect(stranger); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("steward: peer uid %d is not on the agent allow-list", stranger.UID)) {
		t.Fatalf("an account not configured: %v", err)
	}
	ca, err := connect(alpha)
	if err != nil {
		t.Fatalf("alpha: %v", err)
	}
	a1, res := call(t, ctx, ca, ToolCall, callArgs("h1", map[string]any{"text": "hello"}))
	if res.IsError || a1.Status != 200 || a1.ReceiptID == "" {
		t.Fatalf("alpha's call: %+v", a1)
	}

	seq := s.lastSeq()
	warned := lines.next("level=WARN", "another agent's session", "agent=beta", "owner=alpha", "session="+ca.ID()[:sessionIDPrefix]+"…")
	hijack(t, ctx, httpClientAs(sock, beta), ca, 5)
	select {
	case <-warned:
	case <-ctx.Done():
		t.Fatal("no WARN line for beta naming alpha's session")
	}
	hijackWhileOpening(t, ctx, sock, beta, ca)
	if s.lastSeq() != seq {
		t.Fatalf("requests on another agent's session journaled %d records", s.lastSeq()-seq)
	}
	a2, res := call(t, ctx, ca, ToolCall, callArgs("h3", map[string]any{"text": "still alpha's"}))
	if res.IsError || a2.Status != 200 || a2.ReceiptID == "" {
		t.Fatalf("alpha's call after beta's tries: %+v", a2)
	}

	cb, err := connect(beta)
	if err != nil {
		t.Fatalf("beta: %v", err)
	}
	b1, res := call(t, ctx, cb, ToolCall, callArgs("h1", map[string]any{"text": "hello"}))
	if res.IsError || b1.Status != 200 || b1.Replayed || b1.AttemptID == a1.AttemptID {
		t.Fatalf("beta's call with alpha's requestId: %+v, want a fresh attempt", b1)
	}
	ids := []string{ca.ID(), cb.ID()}
	s.stopController()
	s.checkConsentPrincipals(map[string]string{a1.AttemptID: "alpha", a2.AttemptID: "alpha", b1.AttemptID: "beta"})
	checkNoSessionID(t, &lines, ids)
}
