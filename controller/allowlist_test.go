package controller

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testaccount"
)

// proxyOnce runs the proxy binary (optionally as another account), sends
// one initialize line and returns the first line it prints.
func proxyOnce(t *testing.T, sock string, cred *syscall.Credential) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, controllerBin(t), "mcp", "--socket", sock)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the proxy: %v", err)
	}
	return line
}

func TestAgentAllowListRefusesOtherUID(t *testing.T) {
	other := uint32(os.Getuid()) + 4242
	s := newStack(t, stackOpts{edit: func(m map[string]any) {
		m["agents"] = map[string]any{"uids": []uint32{other}, "gids": []uint32{}}
	}})
	s.startController()
	seq := s.lastSeq()
	got := proxyOnce(t, s.cfg.Sockets.MCP, nil)
	// The refusal answers the initialize request by its id (1).
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"steward: peer uid %d is not on the agent allow-list"}}`+"\n", os.Getuid())
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if s.lastSeq() != seq {
		t.Fatal("a refused agent journaled something")
	}
}

// TestAgentAllowListSecondAccount runs the proxy as a second OS account
// whose UID and GID are not on the allow-list.
func TestAgentAllowListSecondAccount(t *testing.T) {
	uid, gid := testaccount.Peer(t)
	bin := controllerBin(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOpts{})
	s.startController()
	// Let the account reach the socket through the file system, so that
	// the refusal is the allow-list's (SO_PEERCRED), not a permission error.
	if err := os.Chmod(s.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(s.cfg.Sockets.MCP, 0, int(gid)); err != nil {
		t.Fatal(err)
	}
	got := proxyOnce(t, s.cfg.Sockets.MCP, &syscall.Credential{Uid: uid, Gid: gid})
	if !strings.Contains(got, fmt.Sprintf("steward: peer uid %d is not on the agent allow-list", uid)) {
		t.Fatalf("got %s", got)
	}
}
