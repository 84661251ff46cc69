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
	if want := append(append([]byte{}, atLimit...), small...); !bytes.Equal(echo.got.Bytes(), want) {
		t.Fatalf("the socket received %d bytes, want exactly the two admitted lines (%d bytes)", echo.got.Len(), len(want))
	}
	if _, err := io.ReadAll(out); err != nil {
		t.Fatal(err)
	}
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
