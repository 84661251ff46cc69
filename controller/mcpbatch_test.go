package controller

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stewardrt/steward/controller/mcpproxy"
)

// rawSession is an MCP session straight on mcp.sock, as a peer that skips
// the proxy, initialized at version ("" leaves it uninitialized).
type rawSession struct {
	t  *testing.T
	c  *net.UnixConn
	br *bufio.Reader
}

func newRawSession(t *testing.T, version string) *rawSession {
	t.Helper()
	s := newStack(t, stackOpts{})
	s.startController()
	c, br := dialRaw(t, s.cfg.Sockets.MCP)
	r := &rawSession{t: t, c: c, br: br}
	if version != "" {
		r.initialize(1, version)
	}
	return r
}

// initialize initializes the session at version, wanting that version.
func (r *rawSession) initialize(id int, version string) {
	r.t.Helper()
	got := r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, id, version), 1)[0]
	if !strings.HasPrefix(got, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, id)) || !strings.Contains(got, fmt.Sprintf(`"protocolVersion":%q`, version)) {
		r.t.Fatalf("initialize at %s: %s", version, got)
	}
	fmt.Fprint(r.c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
}

// send writes line and reads n lines of answer.
func (r *rawSession) send(line string, n int) []string {
	r.t.Helper()
	go r.c.Write([]byte(line + "\n"))
	var got []string
	for range n {
		l, err := r.br.ReadString('\n')
		if err != nil {
			r.t.Fatalf("after %.120s: %v (read %q)", line, err, got)
		}
		got = append(got, strings.TrimSuffix(l, "\n"))
	}
	return got
}

// want sends line and wants exactly the lines want.
func (r *rawSession) want(line string, want ...string) {
	r.t.Helper()
	got := r.send(line, len(want))
	for i := range want {
		if got[i] != want[i] {
			r.t.Fatalf("%.200s: answer %d\n got %s\nwant %s", line, i, got[i], want[i])
		}
	}
	r.goodCall(line)
}

// goodCall wants the session to serve tools/list after line.
func (r *rawSession) goodCall(after string) {
	r.t.Helper()
	if got := r.send(`{"jsonrpc":"2.0","id":"good","method":"tools/list"}`, 1)[0]; !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":"good","result":`) {
		r.t.Fatalf("a good call after %.120s: %.200s", after, got)
	}
}

func errLine(id string, code int, message string) string {
	return strings.TrimSuffix(string(mcpproxy.ErrorLine([]byte(id), code, message)), "\n")
}

const (
	pingLine  = `{"jsonrpc":"2.0","id":%s,"method":"ping"}`
	noticeMsg = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

func ping(id string) string { return fmt.Sprintf(pingLine, id) }

// nestedMember is a ping with id 9 nested depth levels deep, the object
// itself the first.
func nestedMember(depth int) string {
	return `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"_meta":{"x":` + strings.Repeat("[", depth-3) + strings.Repeat("]", depth-3) + "}}}"
}

// TestMCPBatchWithoutBatches: on a session at 2025-06-18 (go-sdk ends the
// session on any batch) a batch is answered by steward, one error line
// per request with its own id, and the session goes on; before initialize
// likewise; an empty batch gets JSON-RPC's one -32600 with id null; a
// member is checked as a line (its nesting counted without the array's);
// a batch that is not JSON gets -32700; the member count is bounded.
func TestMCPBatchWithoutBatches(t *testing.T) {
	r := newRawSession(t, "")
	before := "steward: a batch before initialize; a session begins with an initialize request on a line of its own"
	if got, want := r.send("["+ping("1")+"]", 1)[0], errLine("1", -32600, before); got != want {
		t.Fatalf("a batch before initialize:\n got %s\nwant %s", got, want)
	}
	r.initialize(2, "2025-06-18")

	notPart := "steward: batches are not part of MCP protocol version 2025-06-18; send each message on a line of its own"
	r.want("["+ping(`"a"`)+","+noticeMsg+`,{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`,
		errLine(`"a"`, -32600, notPart), errLine("7", -32600, notPart))
	long := `"` + strings.Repeat("i", 2*mcpproxy.MaxIDBytes) + `"`
	r.want("["+ping(long)+"]", errLine(long, -32600, notPart))
	r.want("[]", errLine("null", -32600, "steward: an empty batch is not a request; a batch holds one message or more"))
	r.want(" [ ] ", errLine("null", -32600, "steward: an empty batch is not a request; a batch holds one message or more"))
	r.want("["+noticeMsg+"]", errLine("null", -32600, notPart))
	for _, line := range []string{"[" + ping("1") + ",", "[" + ping("1") + ",]", "[,]", "[" + ping("1") + "]x", `[{"jsonrpc":"2.0","id":1,}]`} {
		r.want(line, errLine("null", -32700, "steward: request line is not JSON"))
	}
	notMessage := `steward: not a JSON-RPC 2.0 message: it needs "jsonrpc":"2.0", a string "method" (or a result or error), and an "id" that is a string or number when it has one`
	r.want("[5,"+ping("3")+`,[`+ping("4")+`],{"jsonrpc":"1.0","id":6,"method":"ping"}]`,
		errLine("null", -32600, notMessage), errLine("3", -32600, notPart), errLine("null", -32600, notMessage), errLine("6", -32600, notMessage))

	// A member at the nesting bound is a request (the array is not
	// counted); one past it is refused as a line would be.
	r.want("["+nestedMember(mcpproxy.MaxNesting)+"]", errLine("9", -32600, notPart))
	r.want("["+nestedMember(mcpproxy.MaxNesting+1)+"]",
		errLine("9", -32600, fmt.Sprintf("steward: request nesting of %d levels exceeds the bound of 64 levels of objects and arrays", mcpproxy.MaxNesting+1)))

	members := func(n int) (string, []string) {
		var in, out []string
		for i := range n {
			in = append(in, ping(fmt.Sprint(100+i)))
			out = append(out, errLine(fmt.Sprint(100+i), -32600, notPart))
		}
		return "[" + strings.Join(in, ",") + "]", out
	}
	line, want := members(mcpproxy.MaxBatchMembers)
	r.want(line, want...)
	line, _ = members(mcpproxy.MaxBatchMembers + 1)
	r.want(line, errLine("null", -32600, "steward: a batch of 129 messages exceeds the bound of 128 messages; nothing of it was run"))
}

// TestMCPBatchWithBatches: on a session at 2025-03-26, which has batches,
// go-sdk serves a batch of requests with one array of answers; a batch
// go-sdk would end the session on or never answer (a refused member, a
// repeated id, a notification) is answered by steward with an array of
// errors, one per request with its own id, nothing of it run, and the
// session goes on.
func TestMCPBatchWithBatches(t *testing.T) {
	r := newRawSession(t, "2025-03-26")
	got := r.send("["+ping("2")+`,{"jsonrpc":"2.0","id":"x","method":"tools/list"}]`, 1)[0]
	if !strings.HasPrefix(got, `[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":"x","result":{`) || !strings.HasSuffix(got, "}]") {
		t.Fatalf("a batch of two requests: %.300s", got)
	}
	r.goodCall("a batch")
	arr := func(objs ...string) string { return "[" + strings.Join(objs, ",") + "]" }
	notice := "steward: not run: its batch holds a notification, which this server does not serve in a batch; send notifications on lines of their own"
	r.want(arr(ping("3"), noticeMsg), arr(errLine("3", -32600, notice)))
	r.want(arr(noticeMsg), arr(errLine("null", -32600, notice)))
	repeated := "steward: not run: its batch repeats the request id 4; each request of a batch needs its own id"
	r.want(arr(ping("4"), ping("5"), ping("4")), arr(errLine("4", -32600, repeated), errLine("5", -32600, repeated), errLine("4", -32600, repeated)))
	notMessage := `steward: not a JSON-RPC 2.0 message: it needs "jsonrpc":"2.0", a string "method" (or a result or error), and an "id" that is a string or number when it has one`
	refused := "steward: not run: another message of its batch was refused"
	r.want(arr(ping("6"), "5"), arr(errLine("6", -32600, refused), errLine("null", -32600, notMessage)))
	r.want(arr(nestedMember(mcpproxy.MaxNesting+1), ping("7")),
		arr(errLine("9", -32600, fmt.Sprintf("steward: request nesting of %d levels exceeds the bound of 64 levels of objects and arrays", mcpproxy.MaxNesting+1)), errLine("7", -32600, refused)))
	r.want("[]", errLine("null", -32600, "steward: an empty batch is not a request; a batch holds one message or more"))
	if got := r.send(arr(nestedMember(mcpproxy.MaxNesting)), 1)[0]; got != `[{"jsonrpc":"2.0","id":9,"result":{}}]` {
		t.Fatalf("a member at the nesting bound: %s", got)
	}
}

// TestMCPInitializeRefusedParams: an initialize whose params go-sdk
// refuses (with error code 0) or that names no protocol version is
// answered -32602 with its id, and the session stays uninitialized, so
// that a correct initialize follows and is served.
func TestMCPInitializeRefusedParams(t *testing.T) {
	r := newRawSession(t, "")
	for i, params := range []string{`,"params":5`, `,"params":[1]`, `,"params":"x"`, `,"params":null`, ``, `,"params":{}`,
		`,"params":{"protocolVersion":""}`, `,"params":{"protocolVersion":5}`, `,"params":{"protocolVersion":"2025-06-18","capabilities":5}`,
		`,"params":{"protocolVersion":"2025-06-18","clientInfo":"t"}`} {
		id := fmt.Sprint(10 + i)
		line := `{"jsonrpc":"2.0","id":` + id + `,"method":"initialize"` + params + `}`
		if got, want := r.send(line, 1)[0], errLine(id, -32602, "steward: "+initializeParamsText); got != want {
			t.Fatalf("%s:\n got %s\nwant %s", line, got, want)
		}
		// The session goes on, not initialized.
		if got, want := r.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`, 1)[0],
			errLine(`"l"`, -32600, `steward: "tools/list" before initialize; a session begins with an initialize request`); got != want {
			t.Fatalf("tools/list after %s:\n got %s\nwant %s", line, got, want)
		}
	}
	// Under an id too long to echo, go-sdk answers (code 0, with the id),
	// and the session is still not initialized.
	long := `"` + strings.Repeat("i", 2*mcpproxy.MaxIDBytes) + `"`
	if got := r.send(`{"jsonrpc":"2.0","id":`+long+`,"method":"initialize","params":5}`, 1)[0]; !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":`+long+`,"error":{"code":0,`) {
		t.Fatalf("a refused initialize with a long id: %s", got)
	}
	if got, want := r.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`, 1)[0],
		errLine(`"l"`, -32600, `steward: "tools/list" before initialize; a session begins with an initialize request`); got != want {
		t.Fatalf("tools/list after a refused initialize with a long id:\n got %s\nwant %s", got, want)
	}
	r.initialize(2, "2025-06-18")
	r.goodCall("a refused initialize, then a correct one")
}
