package controller

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/controller/foreground"
	"github.com/stewardrt/steward/wire"
)

const initializeWithID = `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"

// dialRaw connects to a controller socket and writes nothing.
func dialRaw(t *testing.T, path string) (*net.UnixConn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// readLineThenEOF wants exactly one line and then the server's close.
func readLineThenEOF(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	got, err := br.ReadString('\n')
	if err != nil || got != want {
		t.Fatalf("read %q, %v\nwant %q", got, err, want)
	}
	if rest, err := br.ReadString('\n'); err != io.EOF {
		t.Fatalf("after the refusal: %q, %v; want the server's close (EOF)", rest, err)
	}
}

func TestMCPSilentSessionIsAnsweredAndClosed(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startControllerWith(Options{FirstRequestTimeout: 300 * time.Millisecond})
	_, br := dialRaw(t, s.cfg.Sockets.MCP)
	readLineThenEOF(t, br, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"steward: no request within 300ms of connecting; the session is closed"}}`+"\n")
}

func TestMCPSessionIdleAfterInitializeStaysOpen(t *testing.T) {
	const first = 200 * time.Millisecond
	s := newStack(t, stackOpts{})
	s.startControllerWith(Options{FirstRequestTimeout: first})
	c, br := dialRaw(t, s.cfg.Sockets.MCP)
	fmt.Fprintf(c, initializeWithID, 1)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	fmt.Fprint(c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	// Idle for several times the first-request deadline: the session stays.
	<-time.After(3 * first)
	fmt.Fprint(c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":2,"result":`) || !strings.Contains(line, `"name":"oracle_call"`) {
		t.Fatalf("tools/list after an idle while: %q, %v", line, err)
	}
}

func TestMCPPerUIDCapAnswersTheRequest(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	// One account's sessions up to its cap, silent: they are admitted
	// (the accept loop takes them in order, before the one past the cap).
	for range mcpMaxPerUID {
		dialRaw(t, s.cfg.Sockets.MCP)
	}
	c, br := dialRaw(t, s.cfg.Sockets.MCP)
	fmt.Fprintf(c, initializeWithID, 7)
	readLineThenEOF(t, br, `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"steward: too many MCP sessions are open (at most 64 per account, 256 in all); close one and connect again"}}`+"\n")
}

func TestMCPRefusalAnswersAStringID(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	for range mcpMaxPerUID {
		dialRaw(t, s.cfg.Sockets.MCP)
	}
	for _, tc := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","id":"abc","method":"initialize"}` + "\n", `"abc"`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n", `null`},
		{"not json\n", `null`},
	} {
		c, br := dialRaw(t, s.cfg.Sockets.MCP)
		fmt.Fprint(c, tc.line)
		readLineThenEOF(t, br, `{"jsonrpc":"2.0","id":`+tc.id+`,"error":{"code":-32001,"message":"steward: too many MCP sessions are open (at most 64 per account, 256 in all); close one and connect again"}}`+"\n")
	}
}

// readReply reads one foreground reply frame.
func readReply(t *testing.T, br *bufio.Reader) foreground.Reply {
	t.Helper()
	frame, err := wire.ReadFrame(br, wire.MaxReplyFrame)
	if err != nil {
		t.Fatalf("reading a foreground reply: %v", err)
	}
	var rep foreground.Reply
	if err := wire.Unmarshal(frame, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read %d bytes, %v; want the server's close (EOF)", n, err)
	}
}

func TestForegroundSilentAndIdleConnectionsAreClosed(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startControllerWith(Options{FirstRequestTimeout: 300 * time.Millisecond})
	want := "no request within 300ms; the connection is closed"

	// A connection that never sends its first request.
	_, br := dialRaw(t, s.cfg.Sockets.Foreground)
	if rep := readReply(t, br); rep.Error != want {
		t.Fatalf("silent connection: %+v, want the error %q", rep, want)
	}
	expectClosed(t, br)

	// One that sends a request, takes its reply, then says nothing more.
	c, br := dialRaw(t, s.cfg.Sockets.Foreground)
	req, _ := wire.Marshal(foreground.Request{Op: foreground.OpAttempts})
	if err := wire.WriteFrame(c, req, wire.MaxRequestFrame); err != nil {
		t.Fatal(err)
	}
	if rep := readReply(t, br); rep.Error != "" || rep.State != foreground.StateDone || string(rep.Result) != "[]" {
		t.Fatalf("attempts: %+v", rep)
	}
	if rep := readReply(t, br); rep.Error != want {
		t.Fatalf("idle after a reply: %+v, want the error %q", rep, want)
	}
	expectClosed(t, br)
}

func TestForegroundPerUIDCap(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	for range fgMaxPerUID {
		dialRaw(t, s.cfg.Sockets.Foreground)
	}
	_, br := dialRaw(t, s.cfg.Sockets.Foreground)
	want := fmt.Sprintf("wire: too many connections: uid %d has %d connections open on %s, the cap is MaxPerUID %d", os.Geteuid(), fgMaxPerUID, s.cfg.Sockets.Foreground, fgMaxPerUID)
	if rep := readReply(t, br); rep.Error != want {
		t.Fatalf("one past the cap: %+v\nwant the error %q", rep, want)
	}
	expectClosed(t, br)
}
