package mcpclients

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stewardrt/steward/dev"
)

// stackTimeout bounds a dev stack's start and its stop.
const stackTimeout = 60 * time.Second

// startStack runs a dev stack (package dev: the host, the controller and
// the reference application, each on its own state, journal and sockets)
// in a fresh state directory until the test ends, and returns what its
// dev.json says. mcpHTTP also serves streamable HTTP. The daemons' logs
// are printed if the test fails.
func startStack(t *testing.T, mcpHTTP bool) dev.Manifest {
	t.Helper()
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan dev.Manifest, 1)
	done := make(chan error, 1)
	var out lockedBuffer
	go func() {
		done <- dev.Run(ctx, dev.Options{
			State:   filepath.Join(t.TempDir(), "s"),
			Stdout:  &out,
			Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			MCPHTTP: mcpHTTP,
			Ready:   func(m dev.Manifest) { ready <- m },
		})
	}()
	var m dev.Manifest
	select {
	case m = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("the dev stack did not start: %v\n%s\n%s", err, out.String(), logs.String())
	case <-time.After(stackTimeout):
		cancel()
		t.Fatalf("the dev stack was not ready after %v\n%s\n%s", stackTimeout, out.String(), logs.String())
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the dev stack's stop: %v", err)
			}
		case <-time.After(stackTimeout):
			t.Errorf("the dev stack did not stop within %v", stackTimeout)
		}
		if t.Failed() {
			t.Logf("the dev stack's logs:\n%s", logs.String())
		}
	})
	return m
}

// lockedBuffer is a bytes.Buffer the daemons' goroutines write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	buildOnce  sync.Once
	builtProxy string
	buildErr   error
)

// proxyBinary is a steward-controller built from this tree, the binary an
// agent's MCP client launches as `steward-controller mcp --socket ...`.
func proxyBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stw-mcpclients-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtProxy = filepath.Join(dir, "steward-controller")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", builtProxy, "github.com/stewardrt/steward/cmd/steward-controller").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build steward-controller: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtProxy
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtProxy != "" {
		os.RemoveAll(filepath.Dir(builtProxy))
	}
	os.Exit(code)
}

// tcpForwarder listens on a loopback TCP port and forwards each connection
// to the Unix socket sock, dialled by this process. It exists because the
// conformance suite takes a URL: the controller sees the forwarder's peer
// credentials (this test's account, the dev stack's agent), not those of
// the suite's process, which is acceptable in this test only. It returns
// the listener's address; the test's end closes it and every connection.
func tcpForwarder(t *testing.T, sock string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{open: map[net.Conn]bool{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("unix", sock, 10*time.Second)
			if err != nil {
				t.Errorf("forwarder: dial %s: %v", sock, err)
				in.Close()
				continue
			}
			f.forward(in, out)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.closeAll()
		f.wg.Wait()
	})
	return ln.Addr().String()
}

// forwarder is tcpForwarder's open connection pairs.
type forwarder struct {
	mu   sync.Mutex
	open map[net.Conn]bool // nil once closeAll has run
	wg   sync.WaitGroup
}

// forward copies in and out both ways until both have ended, then closes
// them.
func (f *forwarder) forward(in, out net.Conn) {
	f.mu.Lock()
	if f.open == nil {
		f.mu.Unlock()
		in.Close()
		out.Close()
		return
	}
	f.open[in], f.open[out] = true, true
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		half := make(chan struct{})
		go func() { pipe(out, in); close(half) }()
		pipe(in, out)
		<-half
		f.mu.Lock()
		delete(f.open, in)
		delete(f.open, out)
		f.mu.Unlock()
		in.Close()
		out.Close()
	}()
}

// closeAll closes every open connection, ending their copies.
func (f *forwarder) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.open {
		c.Close()
	}
	f.open = nil
}

// pipe copies src to dst until src ends, then half-closes dst, so that
// each side sees the other's end as it happened; on a failed copy it
// closes dst, which ends the other direction too.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}
