package appliance

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The tests here hold connections the way a peer that says nothing does,
// and check each deadline one past its bound: the connection is not closed
// before the bound, it is closed after it, and the slot it held serves the
// next client.

// acceptedHook reports each admitted connection on the returned channel.
func acceptedHook(t *testing.T) chan struct{} {
	ch := make(chan struct{}, 8)
	testHookAccepted = func() { ch <- struct{}{} }
	t.Cleanup(func() { testHookAccepted = nil })
	return ch
}

// dialHeld dials the appliance and waits until the connection holds a slot.
func dialHeld(t *testing.T, sock string, accepted chan struct{}) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	<-accepted
	return c
}

// waitClosed reads c until the server closes it and returns how long that
// took from since; a byte from the server fails the test.
func waitClosed(t *testing.T, c net.Conn, since time.Time) time.Duration {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err != io.EOF {
		t.Fatalf("held connection: read %d bytes, %v; want it closed by the server", n, err)
	}
	return time.Since(since)
}

const getOps = "GET /v1/operations/text.sha256 HTTP/1.1\r\nHost: a\r\n\r\n"

// TestHeaderBoundFreesTheSlot: with one connection slot, a peer that
// connects and says nothing is closed once the header bound passes (not
// before), one that sends half a request line is answered 400 then (by
// net/http), and a client queued behind either is then served.
func TestHeaderBoundFreesTheSlot(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, say := range []string{"", "GET /v1/oper"} {
		t.Run("says="+say, func(t *testing.T) {
			accepted := acceptedHook(t)
			a := startApp(t, Config{MaxConnections: 1, HeaderTimeout: bound})
			start := time.Now()
			held := dialHeld(t, a.sock, accepted)
			if _, err := io.WriteString(held, say); err != nil {
				t.Fatal(err)
			}
			queued, err := net.Dial("unix", a.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer queued.Close()
			io.WriteString(queued, getOps)
			if say != "" {
				// A peer that began a request is told why it is closed.
				held.SetReadDeadline(time.Now().Add(30 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(held), nil)
				if err != nil || resp.StatusCode != http.StatusBadRequest || time.Since(start) < bound {
					t.Fatalf("peer that stopped inside its request line: %v, %v after %v; want net/http's 400 after the bound of %v", resp, err, time.Since(start), bound)
				}
			} else if took := waitClosed(t, held, start); took < bound {
				t.Fatalf("silent peer closed after %v, before the header bound of %v", took, bound)
			}
			queued.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(queued), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("client queued behind the silent peer: %v", err)
			}
		})
	}
}

// TestIdleBoundFreesTheSlot: a kept-alive connection that goes quiet
// after an answer is closed once the idle bound passes (not at the
// shorter header bound, not before), and the next client gets its slot.
func TestIdleBoundFreesTheSlot(t *testing.T) {
	const header, idle = 100 * time.Millisecond, 500 * time.Millisecond
	accepted := acceptedHook(t)
	a := startApp(t, Config{MaxConnections: 1, HeaderTimeout: header, IdleTimeout: idle})
	held := dialHeld(t, a.sock, accepted)
	r := bufio.NewReader(held)
	for i := range 2 { // a second request right after the first is served on the same connection
		io.WriteString(held, getOps)
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	quiet := time.Now()
	queued, err := net.Dial("unix", a.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	io.WriteString(queued, getOps)
	if took := waitClosed(t, held, quiet); took < idle {
		t.Fatalf("idle connection closed after %v, before the idle bound of %v", took, idle)
	}
	queued.SetReadDeadline(time.Now().Add(30 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(queued), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("client queued behind the idle connection: %v", err)
	}
}

// TestHandlerBound: an operation that runs past the handler bound is
// answered 503 timeout once the bound passes (not before), the answer is
// journaled and replayed for its requestId without running again, the
// connection is free for the next request while the operation still
// runs, and its late answer is never recorded.
func TestHandlerBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	a := startApp(t, Config{MaxConnections: 1, HandlerTimeout: bound})
	entered, proceed := make(chan struct{}, 4), make(chan struct{})
	runs := 0
	testHookRunning = func(string) {
		runs++
		entered <- struct{}{}
		<-proceed
	}
	t.Cleanup(func() { testHookRunning = nil })
	n := a.records()
	start := time.Now()
	status, body := a.invoke("slow-1", "text.sha256", `{"text":"x"}`)
	took := time.Since(start)
	want := `{"error":{"code":"timeout","details":{"boundMs":300},"message":"operation text.sha256 ran past the bound of 300ms and was abandoned; this answer is recorded for its requestId"}}`
	if status != http.StatusServiceUnavailable || string(body) != want || took < bound {
		t.Fatalf("invocation past the bound: %d %s after %v\nwant 503 %s after at least %v", status, body, took, want, bound)
	}
	<-entered
	if a.records() != n+1 {
		t.Fatalf("%d records for the timeout answer, want 1", a.records()-n)
	}
	status, again := a.invoke("slow-1", "text.sha256", `{"text":"x"}`)
	if status != http.StatusServiceUnavailable || string(again) != want || runs != 1 {
		t.Fatalf("replay of the timed-out requestId: %d %s (runs %d)", status, again, runs)
	}
	if status, _ := a.do(http.MethodGet, "/v1/operations", nil); status != http.StatusOK {
		t.Fatalf("the connection after the timeout answer: %d", status)
	}
	close(proceed)
	testHookRunning = nil
	if status, body := a.invoke("fast-1", "calc.evaluate", `{"expression":"1+1"}`); status != http.StatusOK || !strings.Contains(string(body), `"fraction":"2"`) {
		t.Fatalf("a call after the slow one: %d %s", status, body)
	}
	if a.records() != n+2 {
		t.Fatalf("%d records after the slow and the fast call, want 2: the late answer must not be recorded", a.records()-n)
	}
}
