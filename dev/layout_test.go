package dev

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shortTemp is a temporary directory with a short path, so that the socket
// paths under it fit a Unix socket address.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestLayoutShortStateKeepsSocketsInside(t *testing.T) {
	state := filepath.Join(shortTemp(t), "s")
	l, err := NewLayout(state)
	if err != nil {
		t.Fatal(err)
	}
	if l.Run != filepath.Join(state, "run") {
		t.Fatalf("Run = %s, want %s/run", l.Run, state)
	}
	for _, s := range []string{l.ApplianceSocket, l.ForwardSocket, l.ReverseSocket, l.MCPSocket, l.ForegroundSocket} {
		if filepath.Dir(s) != l.Run {
			t.Errorf("socket %s is not in %s", s, l.Run)
		}
	}
}

// The operator store holds the admin socket and cannot move: a state path
// that leaves no room to bind it is refused at the bound, with the reason.
func TestStorePathBound(t *testing.T) {
	base := shortTemp(t)
	limit := maxSocketDir - len("/operator") // the longest state allowed
	at := filepath.Join(base, strings.Repeat("s", limit-len(base)-1))
	l, _ := NewLayout(at)
	if len(l.State) != limit {
		t.Fatalf("state is %d bytes, want %d", len(l.State), limit)
	}
	if err := l.checkStorePath(); err != nil {
		t.Fatalf("state of %d bytes: %v", len(l.State), err)
	}
	if err := os.MkdirAll(l.State, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.checkSocketDir(); err != nil {
		t.Fatalf("state of %d bytes: the sockets do not fit: %v", len(l.State), err)
	}
	past, _ := NewLayout(at + "s")
	err := past.checkStorePath()
	want := "holds the host's admin socket, and a socket directory may be at most 88 bytes; use a --state of at most 79 bytes"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(89 bytes)") {
		t.Fatalf("state of %d bytes: err = %v", len(past.State), err)
	}
}

// A socket directory that another account prepared, or that others can
// reach, is refused.
func TestCheckSocketDirRefusesOpenDir(t *testing.T) {
	l, _ := NewLayout(filepath.Join(shortTemp(t), "s"))
	if err := os.MkdirAll(l.Run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(l.Run, 0o755); err != nil {
		t.Fatal(err)
	}
	err := l.checkSocketDir()
	if err == nil || !strings.Contains(err.Error(), "mode 0755, want 0700") {
		t.Fatalf("checkSocketDir on a 0755 directory: %v", err)
	}
	if err := os.Chmod(l.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.checkSocketDir(); err != nil {
		t.Fatal(err)
	}
}

func TestManifest(t *testing.T) {
	l, _ := NewLayout(filepath.Join(shortTemp(t), "s"))
	if err := os.MkdirAll(l.State, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.writeManifest(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.ManifestPath())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mcp_socket":        l.MCPSocket,
		"foreground_socket": l.ForegroundSocket,
		"operator_store":    l.OperatorStore,
		"controller_state":  l.Controller,
		"appliance_socket":  l.ApplianceSocket,
	}
	if len(m) != len(want) {
		t.Fatalf("dev.json has %d keys, want %d: %s", len(m), len(want), b)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("dev.json %s = %q, want %q", k, m[k], v)
		}
	}
}
