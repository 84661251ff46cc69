package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer accepts one connection on a Unix socket, records every byte it
// receives and echoes each line back.
type echoServer struct {
	mu   sync.Mutex
	got  bytes.Buffer
	done chan struct{}
}

func startEcho(t *testing.T, path string) *echoServer {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e := &echoServer{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			e.mu.Lock()
			e.got.Write(line)
			e.mu.Unlock()
			if len(line) > 0 {
				c.Write(line)
			}
			if err != nil {
				return
			}
		}
	}()
	return e
}

func jsonLine(n int) []byte {
	// {"jsonrpc":"2.0","method":"x","params":"aaa..."}\n of exactly n bytes.
	head, tail := `{"jsonrpc":"2.0","method":"x","params":"`, "\"}\n"
	return []byte(head + strings.Repeat("a", n-len(head)-len(tail)) + tail)
}

func TestProxyLineBound(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "mcp.sock")
	echo := startEcho(t, sock)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- RunProxy(ctx, sock, inR, outW); outW.Close() }()
	out := bufio.NewReaderSize(outR, 1<<20)
	readLine := func() string {
		t.Helper()
		l, err := out.ReadString('\n')
		if err != nil {
			select {
			case e := <-done:
				t.Fatalf("proxy ended: %v", e)
			default:
			}
			t.Fatalf("reading proxy output: %v", err)
		}
		return l
	}

	atLimit := jsonLine(MaxLine)
	if len(atLimit) != 65536 {
		t.Fatal(len(atLimit))
	}
	go inW.Write(atLimit)
	if got := readLine(); got != string(atLimit) {
		t.Fatalf("line at the bound not echoed whole: %d bytes", len(got))
	}

	over := jsonLine(MaxLine + 1)
	go inW.Write(over)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"steward mcp: request line of 65537 bytes exceeds the bound of 65536 bytes including the newline"}}` + "\n"
	if got := readLine(); got != want {
		t.Fatalf("over the bound:\n got %s\nwant %s", got, want)
	}
	// A line past the bound is answered with its own id, wherever it is
	// in the line (the official TypeScript client puts it last).
	for _, tc := range []struct {
		line []byte
		id   string
	}{
		{idLine(MaxLine+1, `7`, true), `7`},
		{idLine(MaxLine+1, `"last-\"x"`, false), `"last-\"x"`},
		{idLine(3*MaxLine, `-12`, false), `-12`},
	} {
		go inW.Write(tc.line)
		want := `{"jsonrpc":"2.0","id":` + tc.id + `,"error":{"code":-32600,"message":"steward mcp: request line of ` + fmt.Sprint(len(tc.line)) + ` bytes exceeds the bound of 65536 bytes including the newline"}}` + "\n"
		if got := readLine(); got != want {
			t.Fatalf("over the bound with id %s:\n got %s\nwant %s", tc.id, got, want)
		}
	}
	// A line that is not JSON, and one nested past the bound, are answered
	// and not forwarded; one nested at the bound is forwarded (below).
	nested := func(id string, depth int) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"m","params":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + "}\n"
	}
	for _, tc := range []struct{ line, want string }{
		{"{\"id\":1,\"method\":\"m\",}\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"steward mcp: request line is not JSON"}}` + "\n"},
		{nested("8", MaxNesting+1), `{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"steward mcp: request nesting of 65 levels exceeds the bound of 64 levels of objects and arrays"}}` + "\n"},
	} {
		go inW.Write([]byte(tc.line))
		if got := readLine(); got != tc.want {
			t.Fatalf("%.60q:\n got %s\nwant %s", tc.line, got, tc.want)
		}
	}
	// A notification: the echo server answers no call.
	atDepth := strings.Replace(nested("9", MaxNesting), `"id":9,`, "", 1)
	go inW.Write([]byte(atDepth))
	if got := readLine(); got != atDepth {
		t.Fatalf("nesting at the bound not echoed: %q", got)
	}
	// A much longer line is drained too, and the next line still passes.
	huge := jsonLine(5 * MaxLine)
	// A notification: the echo server answers no call, so the proxy has
	// none to wait for when stdin ends.
	small := []byte(`{"jsonrpc":"2.0","method":"notifications/ping"}` + "\n")
	go func() { inW.Write(huge); inW.Write(small) }()
	if got := readLine(); !strings.Contains(got, fmt.Sprintf("request line of %d bytes", 5*MaxLine)) {
		t.Fatalf("huge line: %s", got)
	}
	if got := readLine(); got != string(small) {
		t.Fatalf("line after the refused one: %q", got)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("proxy: %v", err)
	}
	<-echo.done
	echo.mu.Lock()
	defer echo.mu.Unlock()
	if want := append(append(append([]byte{}, atLimit...), atDepth...), small...); !bytes.Equal(echo.got.Bytes(), want) {
		t.Fatalf("the socket received %d bytes, want exactly the three admitted lines (%d bytes)", echo.got.Len(), len(want))
	}
	if _, err := io.ReadAll(out); err != nil {
		t.Fatal(err)
	}
}

// idLine is a request line of exactly n bytes carrying id first or last.
func idLine(n int, id string, first bool) []byte {
	head, tail := `{"jsonrpc":"2.0","method":"tools/call","params":{"x":"`, `"}}`+"\n"
	if first {
		head = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"x":"`
	} else {
		tail = `"},"id":` + id + "}\n"
	}
	return []byte(head + strings.Repeat("a", n-len(head)-len(tail)) + tail)
}

func TestProxyNoSocket(t *testing.T) {
	inR, _, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	err = RunProxy(context.Background(), filepath.Join(t.TempDir(), "absent.sock"), inR, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "steward mcp:") {
		t.Fatalf("err %v", err)
	}
}
