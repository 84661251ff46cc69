package controller

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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rig of BenchmarkCallFloor and BenchmarkCallSweep: one appliance and
// four ways to make the same text.sha256 call on it, each way's processes
// known by pid so that the CPU each spends per call can be read.
//
//	direct  this process -> appliance (HTTP on its socket)
//	bare    proxy -> bare go-sdk server (own process) -> appliance
//	stdio   proxy -> controller (own process) -> host -> appliance
//	http    streamable HTTP client -> controller -> host -> appliance
//
// This process holds the host, the appliance and every client.

// floorBareEnv, set to "SOCK|APPSOCK", makes the test binary the bare
// server: re-executed so that its CPU is its own process's, as the
// controller's is, and not mixed with the host and appliance here.
const floorBareEnv = "STEWARD_FLOOR_BARE"

// floorCloseIdle is the bare server's second tool: it closes the server's
// idle connections to the appliance, so that a phase of another way does
// not find the appliance's 64 connection slots held by kept-alive ones.
const floorCloseIdle = "bench_close_idle"

func init() {
	v := os.Getenv(floorBareEnv)
	if v == "" {
		return
	}
	sock, app, _ := strings.Cut(v, "|")
	if err := serveBare(sock, app); err != nil {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveBare is BenchmarkBareMCP's server: a go-sdk server without custody
// whose tool posts to the application, on sock, one session per
// connection. It says "bare ready" on stdout once listening and returns
// when stdin ends (the benchmark closed it, or died).
func serveBare(sock, appSock string) error {
	cl := unixHTTP(appSock)
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	type in struct {
		Application    string         `json:"application"`
		RequestID      string         `json:"requestId"`
		ConversationID string         `json:"conversationId"`
		OperationID    string         `json:"operationId"`
		Arguments      map[string]any `json:"arguments"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: ToolCall}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		body := fmt.Appendf(nil, `{"arguments":{"text":"hello"},"conversationId":%q,"operationId":%q,"requestId":%q}`, a.ConversationID, a.OperationID, a.RequestID)
		resp, err := cl.Post("http://appliance/v1/invoke", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return nil, map[string]any{"status": resp.StatusCode, "body": json.RawMessage(out)}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: floorCloseIdle}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		cl.CloseIdleConnections()
		return nil, map[string]any{"closed": true}, nil
	})
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				ss, err := srv.Connect(context.Background(), &mcp.IOTransport{Reader: c, Writer: c}, nil)
				if err == nil {
					ss.Wait()
				}
				c.Close()
			}()
		}
	}()
	fmt.Println("bare ready")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// startBare runs the bare server as a child process on sock, posting to
// appSock, and returns its pid once it listens.
func startBare(b *testing.B, sock, appSock string) int {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), floorBareEnv+"="+sock+"|"+appSock)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "bare ready" {
			err = fmt.Errorf("bare server said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatalf("bare server: %v", err)
		}
	case <-time.After(30 * time.Second):
		b.Fatal("bare server not ready within 30s")
	}
	return cmd.Process.Pid
}

// floorCaller is one client of a way: its call, and the pid of its own
// process (a proxy) when it has one.
type floorCaller struct {
	call func() error
	pid  int
}

// floorWay is one way to make the call: a pool of callers (a phase of n
// clients uses the first n), the processes besides this one that serve
// it, and what to do after each phase.
type floorWay struct {
	name    string
	procs   map[string]int // "ctl" or "bare": pid
	callers []floorCaller
	after   func() error
}

// floorRig is the stack and the ways of one benchmark run.
type floorRig struct {
	s       *stack
	ctlPID  int
	barePID int
	ways    []*floorWay
}

// newFloorRig starts the stack (controller child with streamable HTTP
// enabled, host and appliance here), the bare child, and clients callers
// for each named way, in that order.
func newFloorRig(b *testing.B, clients int, names ...string) *floorRig {
	b.Helper()
	s := newStack(b, stackOpts{price: 1, funded: 1 << 40, edit: withMCPHTTP})
	r := &floorRig{s: s, ctlPID: s.startChild().cmd.Process.Pid}
	bareSock := filepath.Join(s.dir, "bare.sock")
	r.barePID = startBare(b, bareSock, s.appSock)
	for _, name := range names {
		w := &floorWay{name: name, procs: map[string]int{}}
		switch name {
		case "direct":
			cl := unixHTTP(s.appSock)
			w.after = func() error { cl.CloseIdleConnections(); return nil }
			for range clients {
				w.callers = append(w.callers, floorCaller{call: func() error { return invokeDirect(cl) }})
			}
		case "bare":
			w.procs["bare"] = r.barePID
			for range clients {
				w.callers = append(w.callers, floorProxyCaller(b, bareSock))
			}
			cs, _ := floorProxy(b, bareSock)
			w.after = func() error {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: floorCloseIdle, Arguments: map[string]any{}})
				return err
			}
		case "stdio":
			w.procs["ctl"] = r.ctlPID
			for range clients {
				w.callers = append(w.callers, floorProxyCaller(b, s.cfg.Sockets.MCP))
			}
		case "http":
			w.procs["ctl"] = r.ctlPID
			for range clients {
				cs, err := httpSession(b, context.Background(), s.cfg.Sockets.MCPHTTP)
				if err != nil {
					b.Fatal(err)
				}
				w.callers = append(w.callers, floorCaller{call: toolCaller(cs.ClientSession)})
			}
		default:
			b.Fatalf("no way %q", name)
		}
		r.ways = append(r.ways, w)
	}
	return r
}

// floorProxy connects a go-sdk client through the proxy binary to sock
// and returns the session and the proxy's pid.
func floorProxy(b *testing.B, sock string) (*mcp.ClientSession, int) {
	b.Helper()
	cmd := exec.Command(controllerBin(b), "mcp", "--socket", sock)
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs, cmd.Process.Pid
}

func floorProxyCaller(b *testing.B, sock string) floorCaller {
	cs, pid := floorProxy(b, sock)
	return floorCaller{call: toolCaller(cs), pid: pid}
}

// toolCaller makes one fresh oracle_call (text.sha256) on cs.
func toolCaller(cs *mcp.ClientSession) func() error {
	return func() error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCall,
			Arguments: callArgs(nextReqID(), map[string]any{"text": "hello"})})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("tool error: %s", res.Content[0].(*mcp.TextContent).Text)
		}
		return nil
	}
}

// procCPU is the CPU time process pid's threads have run, summed from
// /proc/PID/task/*/schedstat (nanoseconds, where /proc/PID/stat counts
// 10 ms ticks); cpuOf's figure when schedstat cannot be read. A thread
// that has exited drops out of the sum: Go's runtime rarely ends one.
func procCPU(pid int) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return cpuOf(pid)
	}
	var ns int64
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue // the thread has just exited
		}
		f, _, _ := strings.Cut(string(b), " ")
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return cpuOf(pid)
		}
		ns += v
	}
	return time.Duration(ns)
}

// readCPU reads the CPU of every process a phase of n clients of w
// involves: its own (ctl, bare), its n callers' proxies summed as
// "proxy", and this process as "self", read last before the calls and
// first after them (after), so that it brackets the calls tightly.
func (w *floorWay) readCPU(n int, into map[string]time.Duration, after bool) {
	if after {
		into["self"] = cpuSelf()
	}
	for name, pid := range w.procs {
		into[name] = procCPU(pid)
	}
	var px time.Duration
	hasProxy := false
	for _, c := range w.callers[:n] {
		if c.pid > 0 {
			px += procCPU(c.pid)
			hasProxy = true
		}
	}
	if hasProxy {
		into["proxy"] = px
	}
	if !after {
		into["self"] = cpuSelf()
	}
}
