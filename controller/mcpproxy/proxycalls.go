package mcpproxy

import (
	"bytes"
	"encoding/json"
	"sync"
)

// openCalls counts the calls the proxy forwarded that the controller has
// not answered yet, by JSON-RPC id as the controller's go-sdk server reads
// it (see headOf). It lets the proxy keep the socket open, once stdin has
// ended, until every call is answered.
type openCalls struct {
	mu    sync.Mutex
	byID  map[callID]int
	n     int
	ended bool // stdin ended: no call is added any more
	// answered is closed once stdin has ended and no call is open.
	answered chan struct{}
}

func newOpenCalls() *openCalls {
	return &openCalls{byID: make(map[callID]int), answered: make(chan struct{})}
}

// forwarding records the calls in one request line before it is written
// to the socket, so that no answer can arrive before its call is counted.
// A line that is not JSON or nests too deep never gets here (CheckLine
// answers it); other JSON the server cannot read as a message is answered
// by the MCP socket, and headOf counts no call in it (see headOf).
func (o *openCalls) forwarding(line []byte) {
	o.record(line, true)
}

// copied records the answers in one line the controller wrote, after it
// was copied to stdout. An answer to no open call (one the proxy did not
// count) changes nothing.
func (o *openCalls) copied(line []byte) {
	o.record(line, false)
}

func (o *openCalls) record(line []byte, calls bool) {
	var ids [1]callID
	found := ids[:0]
	eachHead(line, func(h messageHead) {
		if (calls && h.call) || (!calls && h.answer) {
			found = append(found, h.id)
		}
	})
	if len(found) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range found {
		if calls {
			o.byID[id]++
			o.n++
			continue
		}
		if o.byID[id] == 0 {
			continue
		}
		if o.byID[id]--; o.byID[id] == 0 {
			delete(o.byID, id)
		}
		o.n--
	}
	o.signal()
}

// stdinEnded records that no call will be forwarded any more.
func (o *openCalls) stdinEnded() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.signal()
}

// signal closes answered once stdin has ended and no call is open; the
// caller holds mu.
func (o *openCalls) signal() {
	if o.ended && o.n == 0 {
		select {
		case <-o.answered:
		default:
			close(o.answered)
		}
	}
}

// open is the number of calls not answered yet.
func (o *openCalls) open() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// callID is a JSON-RPC id as the controller's go-sdk server decodes it
// (jsonrpc.MakeID): a string, or a number as the int64 of its float64. It
// is the proxy's own, so the code that runs as the agent links nothing of
// the SDK; FuzzMessageHead holds the two to the same ids.
type callID struct {
	valid bool
	isNum bool
	n     int64
	s     string
}

// Raw is the id's value: an int64, a string, or nil when there is none.
func (id callID) Raw() any {
	switch {
	case !id.valid:
		return nil
	case id.isNum:
		return id.n
	}
	return id.s
}

// messageHead is what the proxy reads of one JSON-RPC message.
type messageHead struct {
	id     callID
	call   bool // a request with an id: the server answers it
	answer bool // a response: it answers the call with its id
}

// eachHead calls f with the head of the one JSON-RPC message on line, or
// of each message of a batch (a JSON array). A line holds one message, as
// the MCP stdio transport has it; what follows the first value is not
// read.
func eachHead(line []byte, f func(messageHead)) {
	i := skipSpace(line, 0)
	if i < len(line) && line[i] == '[' {
		for i = skipSpace(line, i+1); i < len(line) && line[i] != ']'; {
			end := skipValue(line, i)
			if end < 0 {
				return
			}
			if h, ok := headOf(line[i:end]); ok {
				f(h)
			}
			switch i = skipSpace(line, end); {
			case i < len(line) && line[i] == ',':
				i = skipSpace(line, i+1)
			case i >= len(line) || line[i] != ']':
				return
			}
		}
		return
	}
	if h, ok := headOf(line[i:]); ok {
		f(h)
	}
}

// headOf reads the top level of a JSON object as go-sdk's jsonrpc.DecodeMessage,
// the controller's own decoder, classifies it: "jsonrpc" must be "2.0";
// with a "method" key (a string or null) and a string or number "id" it is
// a call; with that id and no "method" it is an answer. Keys compare
// exactly, after unescaping, and a repeated key counts as its last. It
// scans only the bytes of the values it skips, never decoding them (a
// call's params, an answer's result), and does not check them: the server
// ends the session on a message it cannot decode, and the proxy ends with
// it. FuzzMessageHead holds it to jsonrpc.DecodeMessage.
func headOf(msg []byte) (messageHead, bool) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return messageHead{}, false
	}
	var version, id, method []byte
	for i = skipSpace(msg, i+1); i < len(msg) && msg[i] != '}'; {
		kend := skipString(msg, i)
		if kend < 0 {
			return messageHead{}, false
		}
		key := msg[i:kend]
		i = skipSpace(msg, kend)
		if i >= len(msg) || msg[i] != ':' {
			return messageHead{}, false
		}
		i = skipSpace(msg, i+1)
		vend := skipValue(msg, i)
		if vend < 0 {
			return messageHead{}, false
		}
		switch {
		case tokenIs(key, "jsonrpc"):
			version = msg[i:vend]
		case tokenIs(key, "id"):
			id = msg[i:vend]
		case tokenIs(key, "method"):
			method = msg[i:vend]
		}
		switch i = skipSpace(msg, vend); {
		case i < len(msg) && msg[i] == ',':
			i = skipSpace(msg, i+1)
		case i >= len(msg) || msg[i] != '}':
			return messageHead{}, false
		}
	}
	if i >= len(msg) {
		return messageHead{}, false // no closing brace
	}
	if version == nil || !tokenIs(version, "2.0") {
		return messageHead{}, false
	}
	var h messageHead
	switch {
	case id == nil || bytes.Equal(id, []byte("null")):
	default:
		// As the server decodes it: a string, or a number as a float64
		// made an int64.
		if id[0] == '"' {
			h.id = callID{valid: true, s: unquote(id)}
		} else {
			var f float64
			if json.Unmarshal(id, &f) != nil {
				return messageHead{}, false
			}
			h.id = callID{valid: true, isNum: true, n: int64(f)}
		}
	}
	valid := h.id.valid
	if method != nil {
		if method[0] != '"' && !bytes.Equal(method, []byte("null")) {
			return messageHead{}, false
		}
		h.call = valid
	} else {
		h.answer = valid
	}
	return h, h.call || h.answer
}

// tokenIs reports whether tok is a JSON string token whose value is s.
func tokenIs(tok []byte, s string) bool {
	if len(tok) < 2 || tok[0] != '"' {
		return false
	}
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1:len(tok)-1]) == s
	}
	return unquote(tok) == s
}

// unquote is the value of a JSON string token (quotes included). Most keys
// and ids have no escape and are taken as they are.
func unquote(tok []byte) string {
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1])
	}
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return ""
	}
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at
// b[i], or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index just past the JSON value starting at b[i],
// or -1: a string, an object or array (tracked by depth, strings skipped),
// or a bare token (number, true, false, null) up to a delimiter.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	case ',', ':', '}', ']':
		return -1
	}
	start := i
	for i < len(b) && !isDelimiter(b[i]) {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// isDelimiter reports whether c ends a bare token.
func isDelimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
