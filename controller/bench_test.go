package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// The benchmarks run in this order (source order) and share figures so the
// last one can report the ratios of one run:
//
//	go test -run '^$' -bench . -benchtime=3s ./controller/
var (
	benchMu     sync.Mutex
	benchResult = map[string]benchFigures{}
	benchRun    = strconv.FormatInt(time.Now().UnixNano(), 36)
	benchSeq    atomic.Uint64
)

type benchFigures struct {
	perSec float64
	p50ms  float64
}

func nextReqID() string { return "b" + benchRun + "-" + strconv.FormatUint(benchSeq.Add(1), 36) }

// runClients runs b.N calls spread over clients goroutines, each with its
// own caller, and reports calls/s and the median latency.
func runClients(b *testing.B, name string, clients int, newCaller func() func() error) {
	callers := make([]func() error, clients)
	for i := range callers {
		callers[i] = newCaller()
	}
	durs := make([][]time.Duration, clients)
	var next atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	cpu0 := cpuSelf()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := callers[i](); err != nil {
					failed.Store(err)
					return
				}
				durs[i] = append(durs[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuSelf() - cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(durs...)
	slices.Sort(all)
	f := benchFigures{perSec: float64(len(all)) / elapsed.Seconds()}
	if len(all) > 0 {
		f.p50ms = float64(all[len(all)/2].Microseconds()) / 1000
	}
	b.ReportMetric(f.perSec, "calls/s")
	b.ReportMetric(f.p50ms, "p50-ms")
	// CPU time per call of this process (clients, and whatever daemons run
	// in it): unlike calls/s, it hardly moves with the load of the machine.
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(len(all), 1)), "self-cpu-us/call")
	benchMu.Lock()
	benchResult[fmt.Sprintf("%s/%d", name, clients)] = f
	benchMu.Unlock()
}

// unixHTTP is an HTTP client for an application's Unix socket.
func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 64,
	}}
}

// invokeDirect posts one fresh text.sha256 invocation to the application.
func invokeDirect(cl *http.Client) error {
	req, err := oracleops.BuildInvoke("/v1", oracleops.InvokeBody{
		Arguments: []byte(`{"text":"hello"}`), ConversationID: "bench", OperationID: "text.sha256", RequestID: nextReqID()})
	if err != nil {
		return err
	}
	hr, err := req.HTTP(context.Background(), "http://appliance")
	if err != nil {
		return err
	}
	resp, err := cl.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("appliance status %d", resp.StatusCode)
	}
	return nil
}

func benchAppliance(b *testing.B) string {
	dir, err := os.MkdirTemp("", "stwb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "app.sock")
	startAppliance(b, sock, filepath.Join(dir, "state"))
	return sock
}

// BenchmarkDirectAppliance: the same call made straight to the
// application's socket, no MCP, no custody.
func BenchmarkDirectAppliance(b *testing.B) {
	sock := benchAppliance(b)
	for _, n := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) {
			cl := unixHTTP(sock)
			// Each round has its own pool: close it, or the kept-alive
			// connections of earlier rounds fill the appliance's connection
			// cap and later rounds wait for its idle timeout.
			defer cl.CloseIdleConnections()
			runClients(b, "direct", n, func() func() error { return func() error { return invokeDirect(cl) } })
		})
	}
}

// proxySession connects a go-sdk client through the proxy binary.
func proxySession(b *testing.B, sock string) *mcp.ClientSession {
	cmd := exec.Command(controllerBin(b), "mcp", "--socket", sock)
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func mcpCaller(b *testing.B, sock string) func() func() error {
	return func() func() error {
		cs := proxySession(b, sock)
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
}

// BenchmarkBareMCP: a go-sdk MCP server without custody whose tool posts to
// the application directly, reached through the same proxy binary.
func BenchmarkBareMCP(b *testing.B) {
	appSock := benchAppliance(b)
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
	sock := filepath.Join(filepath.Dir(appSock), "bare.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
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
	for _, n := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) {
			runClients(b, "bare", n, mcpCaller(b, sock))
		})
	}
}

// cpuSelf is the user and system CPU time this process has used.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuOf is the user and system CPU time process pid has used, from
// /proc/PID/stat (in clock ticks, 100 a second on Linux), or 0.
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (which is in parentheses) start with
	// the state: utime and stime are the 12th and 13th of them.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return -1
}

// BenchmarkMCPCall: governed oracle_call round trips through the proxy
// binary, the controller (its own process, so that its memory can be
// read), the host and the application (in this process).
//
// With STEWARD_BENCH_INPROC=1 the controller runs in this process instead,
// so that one -cpuprofile (or -blockprofile, -mutexprofile) shows proxy
// client, controller, host and application together; the RSS figures are
// then this whole process's.
func BenchmarkMCPCall(b *testing.B) {
	s := newStack(b, stackOpts{price: 1, funded: 1 << 40})
	pid := os.Getpid()
	if os.Getenv("STEWARD_BENCH_INPROC") != "" {
		s.startController()
	} else {
		pid = s.startChild().cmd.Process.Pid
	}
	idle := rssMB(pid)
	for _, n := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) {
			ctl0 := cpuOf(pid)
			runClients(b, "governed", n, mcpCaller(b, s.cfg.Sockets.MCP))
			if pid != os.Getpid() {
				b.ReportMetric(float64((cpuOf(pid)-ctl0).Microseconds())/float64(b.N), "ctl-cpu-us/call")
			}
			b.ReportMetric(idle, "ctl-idle-RSS-MB")
			b.ReportMetric(rssMB(pid), "ctl-RSS-MB")
			benchMu.Lock()
			g, d, bare := benchResult[fmt.Sprintf("governed/%d", n)], benchResult[fmt.Sprintf("direct/%d", n)], benchResult[fmt.Sprintf("bare/%d", n)]
			benchMu.Unlock()
			if d.p50ms > 0 {
				b.ReportMetric(g.p50ms-d.p50ms, "p50-over-direct-ms")
				b.ReportMetric(g.perSec/d.perSec, "x-direct-calls/s")
			}
			if bare.p50ms > 0 {
				b.ReportMetric(g.p50ms/bare.p50ms, "x-bare-p50")
				b.ReportMetric(g.perSec/bare.perSec, "x-bare-calls/s")
			}
		})
	}
	_ = msg.StateDefinite
}

// httpCaller is mcpCaller over streamable HTTP: each client is go-sdk's
// own streamable client on sock, no proxy process. Its sessions are added
// to open, for the round to close: a benchmark runs its function several
// times, and the sessions of every run would otherwise stay open until the
// end, past the account's cap.
func httpCaller(b *testing.B, sock string, open *[]*httpClientSession) func() func() error {
	return func() func() error {
		cs, err := httpSession(b, context.Background(), sock)
		if err != nil {
			b.Fatal(err)
		}
		*open = append(*open, cs)
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
}

// BenchmarkMCPCallHTTP: BenchmarkMCPCall's governed call over streamable
// HTTP (sockets.mcpHTTP) instead of the stdio proxy and mcp.sock; the
// controller is its own process as there. It reports the ratio of its
// median to the stdio path's of the same run.
func BenchmarkMCPCallHTTP(b *testing.B) {
	s := newStack(b, stackOpts{price: 1, funded: 1 << 40, edit: withMCPHTTP})
	pid := os.Getpid()
	if os.Getenv("STEWARD_BENCH_INPROC") != "" {
		s.startController()
	} else {
		pid = s.startChild().cmd.Process.Pid
	}
	for _, n := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(n), func(b *testing.B) {
			ctl0 := cpuOf(pid)
			var open []*httpClientSession
			runClients(b, "http", n, httpCaller(b, s.cfg.Sockets.MCPHTTP, &open))
			for _, cs := range open {
				cs.Close()
			}
			if pid != os.Getpid() {
				b.ReportMetric(float64((cpuOf(pid)-ctl0).Microseconds())/float64(b.N), "ctl-cpu-us/call")
			}
			b.ReportMetric(rssMB(pid), "ctl-RSS-MB")
			benchMu.Lock()
			h, g := benchResult[fmt.Sprintf("http/%d", n)], benchResult[fmt.Sprintf("governed/%d", n)]
			benchMu.Unlock()
			if g.p50ms > 0 {
				b.ReportMetric(h.p50ms/g.p50ms, "x-stdio-p50")
				b.ReportMetric(h.perSec/g.perSec, "x-stdio-calls/s")
			}
		})
	}
}
