package testscript_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// mcpOptions are the leading flags of the MCP commands: -direct (no proxy:
// straight over the socket) and -as USER (run the proxy as that account,
// with its groups).
type mcpOptions struct {
	direct bool
	as     string
}

func parseMCPOptions(ts *testscript.TestScript, args []string) (mcpOptions, []string) {
	var o mcpOptions
	for len(args) > 0 {
		switch args[0] {
		case "-direct":
			o.direct, args = true, args[1:]
		case "-as":
			if len(args) < 2 {
				ts.Fatalf("-as needs an account")
			}
			o.as, args = args[1], args[2:]
		default:
			return o, args
		}
	}
	return o, args
}

// proxyCommand is the keyless stdio proxy an agent's MCP client launches:
// `steward-controller mcp --socket SOCKET`, found on the journey's PATH, run
// as the account o.as when set.
func proxyCommand(ts *testscript.TestScript, socket string, o mcpOptions) *exec.Cmd {
	bin, err := exec.LookPath("steward-controller")
	if err != nil {
		ts.Fatalf("steward-controller is not on PATH: %v", err)
	}
	cmd := exec.Command(bin, "mcp", "--socket", ts.MkAbs(socket))
	cmd.Env = os.Environ()
	cmd.Dir = ts.MkAbs(".")
	if o.as != "" {
		needRoot(ts, "-as")
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialOf(ts, o.as)}
	}
	return cmd
}

// connectMCP opens an MCP session with a go-sdk client over the proxy, the
// same way an agent does. The proxy's stderr goes to the journey's log.
func connectMCP(ts *testscript.TestScript, ctx context.Context, socket string, o mcpOptions) (*mcp.ClientSession, *bytes.Buffer, error) {
	cmd := proxyCommand(ts, socket, o)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "steward-journey", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		return nil, &stderr, fmt.Errorf("mcp connect over the proxy: %w\n[proxy stderr]\n%s", err, stderr.String())
	}
	return cs, &stderr, nil
}

// connectDirect opens an MCP session straight over the controller's MCP
// socket, without the proxy.
func connectDirect(ts *testscript.TestScript, ctx context.Context, socket string) *mcp.ClientSession {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", ts.MkAbs(socket))
	ts.Check(err)
	client := mcp.NewClient(&mcp.Implementation{Name: "steward-journey", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		ts.Fatalf("mcp connect over %s: %v", socket, err)
	}
	return cs
}

// cmdMCPCall implements `[!] mcp-call [-direct] [-as USER] SOCKET TOOL
// JSON-ARGS`: one tools/call through the proxy, or with -direct straight over
// the MCP socket (an agent that skips the proxy, as the bounds journey needs
// for requests the proxy's line bound would stop first). It prints the tool's structured result as one line of
// compact JSON (or its text content when there is none). A result with
// isError, or a JSON-RPC error, is a failure of the command: `! mcp-call`
// expects a refusal, whose text goes to stdout (tool error) or stderr
// (protocol error).
func cmdMCPCall(ts *testscript.TestScript, neg bool, args []string) {
	o, args := parseMCPOptions(ts, args)
	if len(args) != 3 {
		ts.Fatalf("usage: mcp-call [-direct] [-as USER] SOCKET TOOL JSON-ARGS")
	}
	if !json.Valid([]byte(args[2])) {
		ts.Fatalf("mcp-call: the arguments are not valid JSON: %.200s", args[2])
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	var cs *mcp.ClientSession
	proxyErr := new(bytes.Buffer)
	if o.direct {
		cs = connectDirect(ts, ctx, args[0])
	} else {
		var err error
		cs, proxyErr, err = connectMCP(ts, ctx, args[0], o)
		if err != nil {
			// A refusal before the session starts (an account not on the
			// agent allow-list) is a refusal too.
			fmt.Fprintf(ts.Stderr(), "%v\n", err)
			if !neg {
				ts.Fatalf("mcp-call %s: %v", args[1], err)
			}
			return
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: args[1], Arguments: json.RawMessage(args[2])})
	closeErr := cs.Close()
	if proxyErr.Len() > 0 {
		ts.Logf("[proxy stderr]\n%s", proxyErr.String())
	}
	if err != nil {
		fmt.Fprintf(ts.Stderr(), "mcp error: %v\n", err)
		if !neg {
			ts.Fatalf("mcp-call %s: %v", args[1], err)
		}
		return
	}
	if closeErr != nil {
		ts.Logf("closing the MCP session: %v", closeErr)
	}
	fmt.Fprintln(ts.Stdout(), resultLine(ts, res))
	switch {
	case res.IsError && !neg:
		ts.Fatalf("mcp-call %s: the tool refused", args[1])
	case !res.IsError && neg:
		ts.Fatalf("mcp-call %s: unexpected success", args[1])
	}
}

// resultLine renders a tool result for the journey to match against.
func resultLine(ts *testscript.TestScript, res *mcp.CallToolResult) string {
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		ts.Check(err)
		return string(b)
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// cmdMCPList implements `mcp-list [-as USER] SOCKET`: tools/list through the
// proxy. It
// prints `tool NAME` for each tool, then the whole list as one JSON line, so a
// journey can count the tools and check what the list must never show.
func cmdMCPList(ts *testscript.TestScript, neg bool, args []string) {
	o, args := parseMCPOptions(ts, args)
	if neg || len(args) != 1 || o.direct {
		ts.Fatalf("usage: mcp-list [-as USER] SOCKET")
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	cs, _, err := connectMCP(ts, ctx, args[0], o)
	ts.Check(err)
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	ts.Check(err)
	for _, t := range res.Tools {
		fmt.Fprintf(ts.Stdout(), "tool %s\n", t.Name)
	}
	b, err := json.Marshal(res)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%s\n", b)
}

// rawHandshake is what an MCP client sends first: initialize at a protocol
// version the go-sdk server supports, then the initialized notification.
var rawHandshake = []string{
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"steward-journey","version":"v1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
}

// cmdMCPRaw implements `[!] mcp-raw [-as USER] SOCKET LINE...`: runs the
// proxy (as USER when given), sends the MCP handshake and then each LINE as
// bytes, and prints every reply line the proxy writes for them, and any
// error the handshake got (a refused connection answers it with one). A LINE
// of the form `@pad=N:JSON` is JSON padded with spaces before its last byte
// so that the line, newline included, is exactly N bytes. A line that is a
// JSON object without "id" (a notification) expects no reply; every other
// line expects one, waited for with a deadline. When the proxy's output ends
// early the remaining lines are not sent. The command fails when the proxy
// exits with an error (the controller closed the connection), unless negated.
func cmdMCPRaw(ts *testscript.TestScript, neg bool, args []string) {
	o, args := parseMCPOptions(ts, args)
	if len(args) < 2 || o.direct {
		ts.Fatalf("usage: mcp-raw [-as USER] SOCKET LINE...")
	}
	cmd := proxyCommand(ts, args[0], o)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	ts.Check(err)
	stdout, err := cmd.StdoutPipe()
	ts.Check(err)
	ts.Check(cmd.Start())
	replies := make(chan string, 16)
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				replies <- strings.TrimRight(line, "\n")
			}
			if err != nil {
				close(replies)
				return
			}
		}
	}()
	// send writes one line and waits for its reply; false when the proxy's
	// output has ended.
	send := func(line string, handshake bool) bool {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			fmt.Fprintf(ts.Stderr(), "mcp-raw: writing to the proxy: %v\n", err)
			return false
		}
		if !expectsReply(line) {
			return true
		}
		select {
		case reply, ok := <-replies:
			if !ok {
				fmt.Fprintf(ts.Stderr(), "mcp-raw: the proxy's output ended\n")
				return false
			}
			if !handshake || strings.Contains(reply, `"error"`) {
				fmt.Fprintln(ts.Stdout(), reply)
			}
			return true
		case <-time.After(defaultWait):
			_ = cmd.Process.Kill()
			ts.Fatalf("mcp-raw: no reply within %v", defaultWait)
			return false
		}
	}
	open := true
	for _, l := range rawHandshake {
		if open = send(l, true); !open {
			break
		}
	}
	for _, a := range args[1:] {
		if !open {
			break
		}
		line := a
		if spec, ok := strings.CutPrefix(a, "@pad="); ok {
			line = padLine(ts, spec)
		}
		ts.Logf("> mcp-raw line of %d bytes with its newline", len(line)+1)
		open = send(line, false)
	}
	_ = stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(defaultWait):
		_ = cmd.Process.Kill()
		ts.Fatalf("mcp-raw: the proxy did not exit after its stdin closed")
	}
	fmt.Fprint(ts.Stderr(), stderr.String())
	switch {
	case err != nil && !neg:
		ts.Fatalf("mcp-raw: the proxy exited with %v", err)
	case err == nil && neg:
		ts.Fatalf("mcp-raw: unexpected success")
	}
}

// expectsReply reports whether a JSON-RPC line is answered: everything but a
// well-formed notification (an object with a method and no id).
func expectsReply(line string) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return true
	}
	_, hasID := m["id"]
	_, hasMethod := m["method"]
	return hasID || !hasMethod
}

// padLine builds the line of `@pad=N:JSON`: JSON with spaces inserted before
// its closing byte so that the line plus its newline is exactly N bytes.
func padLine(ts *testscript.TestScript, spec string) string {
	nStr, js, ok := strings.Cut(spec, ":")
	if !ok {
		ts.Fatalf("mcp-raw: %q is not @pad=N:JSON", spec)
	}
	n, err := strconv.Atoi(nStr)
	ts.Check(err)
	pad := n - 1 - len(js)
	if pad < 0 || len(js) == 0 {
		ts.Fatalf("mcp-raw: JSON of %d bytes does not fit a line of %d", len(js), n)
	}
	return js[:len(js)-1] + strings.Repeat(" ", pad) + js[len(js)-1:]
}
