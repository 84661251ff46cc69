package mcpproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeController listens on a real Unix socket and runs serve on the one
// connection it accepts; done is closed when serve returns.
func fakeController(t *testing.T, serve func(c *net.UnixConn)) (sock string, done chan struct{}) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "mcp.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done = make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return sock, done
}

// proxyWithInput runs the proxy function over real pipes, with stdin
// holding input and then either closed or left open, and returns what it
// printed and returned.
func proxyWithInput(t *testing.T, sock, input string, closeStdin bool, bound time.Duration) (string, error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	if _, err := io.WriteString(inW, input); err != nil {
		t.Fatal(err)
	}
	if closeStdin {
		inW.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runProxy(ctx, sock, inR, outW, bound); outW.Close() }()
	out, rerr := io.ReadAll(outR)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return string(out), <-done
}

const pingLine = `{"jsonrpc":"2.0","id":9,"method":"ping"}` + "\n"

// TestProxyLongAnswer: an answer longer than the proxy's read buffer is
// copied whole and still counted as the answer to its call.
func TestProxyLongAnswer(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":9,"result":{"text":"` + strings.Repeat("x", 200<<10) + `"}}` + "\n"
	sock, done := fakeController(t, func(c *net.UnixConn) {
		br := bufio.NewReader(c)
		if _, err := br.ReadString('\n'); err != nil {
			return
		}
		io.WriteString(c, answer)
		io.Copy(io.Discard, br) // until the proxy half-closes
	})
	out, err := proxyWithInput(t, sock, pingLine, true, time.Minute)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if out != answer {
		t.Fatalf("printed %d bytes, want the %d-byte answer", len(out), len(answer))
	}
	<-done
}

// TestProxyAnswerBound: a controller that never answers holds the proxy
// only for the bound after stdin ends; then the proxy closes the
// connection and fails, naming the calls left unanswered.
func TestProxyAnswerBound(t *testing.T) {
	sawEnd := make(chan error, 1)
	sock, done := fakeController(t, func(c *net.UnixConn) {
		_, err := io.Copy(io.Discard, c) // reads both calls, answers neither
		sawEnd <- err
	})
	const bound = 50 * time.Millisecond
	out, err := proxyWithInput(t, sock, pingLine+`{"jsonrpc":"2.0","id":10,"method":"ping"}`+"\n", true, bound)
	want := "steward mcp: 2 calls unanswered 50ms after stdin ended (the bound)"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v, want %s", err, want)
	}
	if out != "" {
		t.Fatalf("printed %q", out)
	}
	if err := <-sawEnd; err != nil {
		t.Fatalf("the controller's side: %v", err)
	}
	<-done
}

// TestProxyControllerCloses: a controller that closes the connection with
// a call unanswered ends the proxy, whether stdin has ended or not.
func TestProxyControllerCloses(t *testing.T) {
	refusal := `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"steward: connection refused"}}` + "\n"
	for _, closeStdin := range []bool{true, false} {
		t.Run(fmt.Sprintf("stdinClosed=%v", closeStdin), func(t *testing.T) {
			sock, done := fakeController(t, func(c *net.UnixConn) {
				bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, refusal)
			})
			out, err := proxyWithInput(t, sock, pingLine, closeStdin, time.Minute)
			want := "steward mcp: the controller closed the connection with 1 call unanswered"
			if err == nil || err.Error() != want {
				t.Fatalf("err %v, want %s", err, want)
			}
			if out != refusal {
				t.Fatalf("printed %q, want the refusal", out)
			}
			<-done
		})
	}
}

// TestProxyBoundAfterAnswers: a controller that answers every call but
// never ends the session after the proxy half-closes holds the proxy only
// for the bound.
func TestProxyBoundAfterAnswers(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	sock, _ := fakeController(t, func(c *net.UnixConn) {
		br := bufio.NewReader(c)
		if _, err := br.ReadString('\n'); err != nil {
			return
		}
		io.WriteString(c, `{"jsonrpc":"2.0","id":9,"result":{}}`+"\n")
		io.Copy(io.Discard, br) // the proxy's half-close
		<-release               // and then never close
	})
	out, err := proxyWithInput(t, sock, pingLine, true, 50*time.Millisecond)
	want := "steward mcp: every call was answered, but the controller had not closed the connection 50ms after stdin ended (the bound)"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v, want %s", err, want)
	}
	if out != `{"jsonrpc":"2.0","id":9,"result":{}}`+"\n" {
		t.Fatalf("printed %q", out)
	}
}

// TestProxyBoundAfterRefusedWrite: a controller that stops reading (the
// socket refuses the proxy's write) but never closes holds the proxy only
// for the bound, and the proxy fails with the refused write.
func TestProxyBoundAfterRefusedWrite(t *testing.T) {
	shut := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	sock, _ := fakeController(t, func(c *net.UnixConn) {
		c.CloseRead()
		close(shut)
		<-release
	})
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	// No deadline of the test's own: only the bound ends the wait.
	done := make(chan error, 1)
	go func() { done <- runProxy(context.Background(), sock, inR, io.Discard, 50*time.Millisecond) }()
	<-shut
	if _, err := io.WriteString(inW, pingLine); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if err == nil || !strings.HasPrefix(err.Error(), "steward mcp: writing to the MCP socket: ") || !strings.HasSuffix(err.Error(), "broken pipe") {
		t.Fatalf("err %v, want the refused write", err)
	}
}

// BenchmarkProxyCallAccounting is what the proxy adds per call to count
// it: reading the id of a tools/call line and of its answer (a 4 KiB
// JSON body, in the text content and the structured content alike).
func BenchmarkProxyCallAccounting(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"oracle_call","arguments":{"application":"appliance","requestId":"r-123456","conversationId":"conv-1","operationId":"text.sha256","arguments":{"text":"hello"}}}}` + "\n")
	body := strings.Repeat("x", 4096)
	result := `{"outcome":"definite","status":200,"body":{"text":"` + body + `"}}`
	answer := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":` + strconv.Quote(result) + `}],"structuredContent":` + result + `}}` + "\n")
	calls := newOpenCalls()
	b.ReportAllocs()
	for b.Loop() {
		calls.forwarding(req)
		calls.copied(answer)
	}
	if calls.open() != 0 {
		b.Fatal(calls.open())
	}
}
