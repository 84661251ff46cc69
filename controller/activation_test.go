package controller

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckAdopted: a passed listener must be one Serve knows, bound at the
// config's path for it; anything else is refused, naming it.
func TestCheckAdopted(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string) *net.UnixListener {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, name), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	s := Sockets{MCP: filepath.Join(dir, "mcp.sock"), Reverse: filepath.Join(dir, "reverse.sock"), Foreground: filepath.Join(dir, "fg.sock")}
	mcp, fg, rev, other := listen("mcp.sock"), listen("fg.sock"), listen("reverse.sock"), listen("other.sock")
	if err := checkAdopted(nil, s); err != nil {
		t.Fatalf("none passed: %v", err)
	}
	if err := checkAdopted(map[string]*net.UnixListener{ListenerMCP: mcp, ListenerForeground: fg}, s); err != nil {
		t.Fatalf("two passed: %v", err)
	}
	for _, c := range []struct {
		ls   map[string]*net.UnixListener
		want string
	}{
		{map[string]*net.UnixListener{"admin": mcp}, `passed listener "admin" is neither foreground nor mcp`},
		// systemd's reverse socket would report uid 0 to the host's peer check.
		{map[string]*net.UnixListener{ListenerReverse: rev}, `a passed reverse listener cannot be served: the host's SO_PEERCRED check would see systemd (uid 0), not the controller`},
		{map[string]*net.UnixListener{ListenerMCP: mcp, ListenerReverse: rev}, `a passed reverse listener cannot be served`},
		// The advisor socket is the controller's own, like the reverse one.
		{map[string]*net.UnixListener{ListenerAdvisor: other}, `a passed advisor listener cannot be served: the controller binds the advisor socket itself`},
		{map[string]*net.UnixListener{ListenerMCP: mcp, ListenerAdvisor: other}, `a passed advisor listener cannot be served`},
		{map[string]*net.UnixListener{ListenerForeground: other}, `passed listener "foreground" is bound at ` + filepath.Join(dir, "other.sock") + `, but the config's socket for it is ` + s.Foreground},
		{map[string]*net.UnixListener{ListenerMCP: rev}, `passed listener "mcp" is bound at`},
		{map[string]*net.UnixListener{ListenerMCP: nil}, `passed listener "mcp" is nil`},
	} {
		err := checkAdopted(c.ls, s)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.ls, err, c.want)
		}
	}
}
