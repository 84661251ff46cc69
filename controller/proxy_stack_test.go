package controller

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// The proxy's own tests are package mcpproxy's; these run the real
// steward-controller binary's proxy against a real controller.

const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"

// runProxyBinary runs the real proxy binary on sock with stdin holding
// exactly input (closed right after it), and returns its stdout lines.
func runProxyBinary(t *testing.T, bin, sock, input string) (lines []string, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp", "--socket", sock)
	cmd.Stdin = strings.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	// Each line keeps its newline; a last line without one stays last.
	lines = strings.SplitAfter(out.String(), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, errb.String(), err
}

// TestProxyAnswersBeforeEOF runs the real proxy binary against a real
// controller 200 times, each time writing one request line and closing
// stdin at once: every run prints exactly the controller's answer and
// exits 0. Before the proxy waited for its calls' answers, 10-17 of 20
// runs printed nothing.
func TestProxyAnswersBeforeEOF(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	bin := controllerBin(t)
	const runs = 200
	answered := 0
	for i := range runs {
		lines, stderr, err := runProxyBinary(t, bin, s.cfg.Sockets.MCP, initializeLine)
		if len(lines) != 1 || !strings.HasPrefix(lines[0], `{"jsonrpc":"2.0","id":1,"result":{`) || !strings.HasSuffix(lines[0], "}\n") {
			t.Errorf("run %d: stdout %q, stderr %q, exit %v", i, lines, stderr, err)
			continue
		}
		if err != nil {
			t.Errorf("run %d: answered, but the proxy exited with %v: %s", i, err, stderr)
			continue
		}
		answered++
	}
	if answered != runs {
		t.Fatalf("%d of %d runs answered and exited 0", answered, runs)
	}
}

// TestProxyAnswersEveryCallBeforeEOF sends a session's worth of lines
// (calls with number and string ids, and a notification that has no
// answer) and closes stdin at once: each call is answered.
func TestProxyAnswersEveryCallBeforeEOF(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	input := initializeLine +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":"two","method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"steward_overview","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n"
	lines, stderr, err := runProxyBinary(t, controllerBin(t), s.cfg.Sockets.MCP, input)
	if err != nil {
		t.Fatalf("proxy: %v: %s", err, stderr)
	}
	var ids []string
	for _, l := range lines {
		id, _, ok := strings.Cut(strings.TrimPrefix(l, `{"jsonrpc":"2.0","id":`), `,"result"`)
		if !ok {
			t.Fatalf("not an answer: %s", l)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids) // calls are answered as they finish, not in order
	if got, want := strings.Join(ids, " "), `"two" 1 3 4`; got != want {
		t.Fatalf("answered ids %s, want %s", got, want)
	}
}
