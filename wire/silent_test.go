package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// dialSilent connects to path and writes nothing: a peer that holds a slot.
func dialSilent(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectEOF reads from c and wants the server's close, within the test's patience.
func expectEOF(t *testing.T, c *net.UnixConn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("%s: read %d bytes, %v; want the server's close (EOF)", what, n, err)
	}
}

func TestEvictSilentAdmitsANewConnection(t *testing.T) {
	ck := mustKey(t)
	path := filepath.Join(t.TempDir(), "admin.sock")
	s := startFrameServer(t, ListenConfig{Path: path, Allow: allowAll, MaxConns: 2, MaxPerUID: 2, EvictSilent: true}, NewKeyring(ck.Public()))
	a, b := dialSilent(t, path), dialSilent(t, path)
	<-s.admitted
	<-s.admitted
	// Both slots are held by peers that never spoke: a new connection
	// takes the oldest one's slot, and that one is closed.
	c, err := dialHandshake(t, path, ck, s.key.Public())
	if err != nil {
		t.Fatalf("past the cap held by silent peers: %v", err)
	}
	defer c.Close()
	expectEOF(t, a, "the oldest silent connection")
	<-s.channels
	d, err := dialHandshake(t, path, ck, s.key.Public())
	if err != nil {
		t.Fatalf("second connection past the cap: %v", err)
	}
	defer d.Close()
	expectEOF(t, b, "the other silent connection")
	<-s.channels
	if !strings.Contains(s.log.String(), "evicted a connection that has not proven itself") {
		t.Fatalf("eviction not logged: %s", s.log)
	}
	// Proven connections are never evicted: one past them is refused.
	_, err = dialHandshake(t, path, ck, s.key.Public())
	want := fmt.Sprintf("wire: too many connections: 2 connections open on %s, the cap is MaxConns 2", path)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("past a cap of proven connections: %v, want ErrRefused saying %q", err, want)
	}
}

// readingRefuse answers a refused peer with the first line it sends, as the
// MCP socket does, and says on started when it begins to wait for it.
func readingRefuse(started chan<- struct{}) func(*net.UnixConn, error) {
	return func(c *net.UnixConn, reason error) {
		started <- struct{}{}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			fmt.Fprintf(c, "refused without a request (%v): %v\n", errors.Is(err, os.ErrDeadlineExceeded), reason)
			return
		}
		fmt.Fprintf(c, "refused %q: %v\n", strings.TrimSpace(line), reason)
	}
}

func TestRefusalReadsTheRequestWithoutHoldingAccept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.sock")
	var calls atomic.Int32
	started := make(chan struct{}, MaxRefusing+1)
	l, err := Listen(ListenConfig{Path: path, Allow: func(PeerCred) error {
		if calls.Add(1) <= MaxRefusing+1 {
			return ErrWrongPeer
		}
		return nil
	}, Refuse: readingRefuse(started), RefuseTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	admitted := make(chan *PeerConn, 1)
	go func() {
		for {
			pc, err := l.Accept()
			if err != nil {
				return
			}
			admitted <- pc
		}
	}()
	// MaxRefusing refused peers that say nothing: each is waited for in
	// its own goroutine, for up to RefuseTimeout.
	var held []*net.UnixConn
	for range MaxRefusing {
		held = append(held, dialSilent(t, path))
		<-started
	}
	// One past them is answered at once, without its request.
	over := dialSilent(t, path)
	<-started
	br := bufio.NewReader(over)
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := br.ReadString('\n')
	reason := fmt.Sprintf("uid %d gid %d pid %d is not allowed on %s: wire: wrong peer", os.Geteuid(), os.Getegid(), os.Getpid(), path)
	want := "refused without a request (true): " + reason + "\n"
	if err != nil || got != want {
		t.Fatalf("refusal past MaxRefusing: %q, %v; want %q", got, err, want)
	}
	// Accept is not held by the refusals waiting: an allowed peer is admitted.
	ok := dialSilent(t, path)
	pc := <-admitted
	pc.Close()
	ok.Close()
	// A waiting refused peer that speaks is answered with its request.
	fmt.Fprintf(held[0], "hello\n")
	held[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err = bufio.NewReader(held[0]).ReadString('\n')
	if want := "refused \"hello\": " + reason + "\n"; err != nil || got != want {
		t.Fatalf("refused peer that spoke: %q, %v; want %q", got, err, want)
	}
}

func TestServeIdleClosesAQuietChannel(t *testing.T) {
	const idle = 200 * time.Millisecond
	p := newPair(t)
	defer p.client.Close()
	served := make(chan error, 1)
	start := time.Now()
	go func() {
		served <- ServeIdle(context.Background(), p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) {
			// A request that runs longer than idle: no deadline runs
			// while the peer waits for its reply.
			<-time.After(3 * idle)
			return "pong", "late"
		}), idle)
	}()
	cl := NewClient(p.client)
	defer cl.Close()
	if _, err := cl.Call(context.Background(), "ping", "x"); err != nil {
		t.Fatalf("a request longer than the idle deadline: %v", err)
	}
	// Then the peer is quiet: the channel is closed idle after the reply.
	err := <-served
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ServeIdle on a quiet channel: %v, want a deadline error", err)
	}
	if took := time.Since(start); took < 4*idle {
		t.Fatalf("closed %v after the start, before the handler's %v and the idle deadline %v", took, 3*idle, idle)
	}
	<-cl.Done()
}
