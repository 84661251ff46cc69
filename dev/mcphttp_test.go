package dev

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller"
)

// TestRunMCPHTTP: with Options.MCPHTTP the controller's config names
// RUN/mcp-http.sock as sockets.mcpHTTP, Ready reports it with the rest of
// dev.json, an MCP initialize over it is served, and the stop removes it
// with the other sockets. A stack started without the option names no such
// socket (its config is the one `steward-dev` has always written), and a
// state provisioned with the option is refused without it, since the
// controller's journal is bound to its config, with an error that says
// streamable HTTP was on (or, the other way round, off) rather than that
// the state directory moved.
func TestRunMCPHTTP(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	var seen Manifest
	var served bool
	err := Run(sctx, Options{State: state, Stdout: io.Discard, Logger: quietLogger(), MCPHTTP: true, Ready: func(m Manifest) {
		defer stop()
		seen = m
		served = initializeOver(t, ctx, m.MCPHTTPSocket)
	}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	l, _ := NewLayout(state)
	if want := filepath.Join(l.Run, "mcp-http.sock"); seen.MCPHTTPSocket != want {
		t.Errorf("Ready's manifest names %q as the streamable HTTP socket, want %q", seen.MCPHTTPSocket, want)
	}
	if !served {
		t.Error("no initialize was served on the streamable HTTP socket")
	}
	raw, err := os.ReadFile(l.ManifestPath())
	var onDisk Manifest
	if err != nil || json.Unmarshal(raw, &onDisk) != nil || onDisk != seen {
		t.Errorf("dev.json %s (%v) differs from what Ready reported: %+v", raw, err, seen)
	}
	cfg, err := controller.ParseConfig(mustRead(t, l.Config))
	if err != nil || cfg.Sockets.MCPHTTP != seen.MCPHTTPSocket {
		t.Errorf("the controller config's sockets.mcpHTTP: %v %v", cfg, err)
	}
	checkStopped(t, l.WithMCPHTTP())

	err = Run(ctx, Options{State: state, Once: true, Stdout: io.Discard, Logger: quietLogger()})
	if want := "steward-dev: provisioning " + state + ": this state was provisioned with streamable HTTP on (Options.MCPHTTP); start it the same way or remove the state directory " + state; err == nil || err.Error() != want {
		t.Errorf("a start without MCPHTTP of a state provisioned with it:\n got %v\nwant %s", err, want)
	}

	plain := filepath.Join(t.TempDir(), "p")
	pctx, pstop := context.WithCancel(ctx)
	err = Run(pctx, Options{State: plain, Stdout: io.Discard, Logger: quietLogger(), Ready: func(m Manifest) {
		defer pstop()
		seen = m
	}})
	if err != nil {
		t.Fatalf("Run without MCPHTTP: %v", err)
	}
	pl, _ := NewLayout(plain)
	if seen.MCPHTTPSocket != "" || bytes.Contains(mustRead(t, pl.Config), []byte("mcpHTTP")) || bytes.Contains(mustRead(t, pl.ManifestPath()), []byte("mcp_http")) {
		t.Errorf("a stack without MCPHTTP names a streamable HTTP socket: %+v\n%s", seen, mustRead(t, pl.Config))
	}
	err = Run(ctx, Options{State: plain, Once: true, MCPHTTP: true, Stdout: io.Discard, Logger: quietLogger()})
	if want := "steward-dev: provisioning " + plain + ": this state was provisioned with streamable HTTP off (Options.MCPHTTP); start it the same way or remove the state directory " + plain; err == nil || err.Error() != want {
		t.Errorf("a start with MCPHTTP of a state provisioned without it:\n got %v\nwant %s", err, want)
	}
}

// initializeOver posts an MCP initialize to the streamable HTTP socket
// sock and reports whether it was answered 200 with a session.
func initializeOver(t *testing.T, ctx context.Context, sock string) bool {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"dev-test","version":"1"}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://steward/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("initialize over %s: %v", sock, err)
		return false
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !bytes.Contains(out, []byte(`"serverInfo"`)) {
		t.Errorf("initialize over %s: %d %s", sock, resp.StatusCode, out)
		return false
	}
	return true
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
