package operator

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// MaxResponseBody bounds an application's answer: it must fit a reply frame
// with the dispatch result around it (attempt, receipt, envelope, signature).
const MaxResponseBody = wire.MaxReplyFrame - 16<<10

// delivered is what became of one delivery.
type delivered struct {
	sent   bool   // at least one byte of the request was written
	detail string // why it was not sent
	err    string // why the answer was not received (sent is true)
	status int
	body   []byte
}

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// deliver sends req to the application over a fresh connection to the
// route's upstream socket and reads its answer. Up to the first byte written
// a failure is "not sent"; from then on it is uncertain. A fresh connection
// per delivery keeps that line exact: a kept-alive connection the server
// closed would turn a not-sent into a false uncertain.
func deliver(rt *msg.RouteRecord, req oracleops.Request) delivered {
	conn, err := net.DialTimeout("unix", rt.Upstream, time.Duration(rt.Timeouts.ConnectMs)*time.Millisecond)
	if err != nil {
		return delivered{detail: "connect to the application: " + err.Error()}
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Duration(rt.Timeouts.ResponseMs) * time.Millisecond)); err != nil {
		return delivered{detail: "connect to the application: " + err.Error()}
	}
	wireBytes := httpRequest(req)
	failpoint.Hit(FailAfterMarkSend)
	n, err := conn.Write(wireBytes)
	if n == 0 && err != nil {
		return delivered{detail: "write to the application: " + err.Error()}
	}
	if err != nil {
		return delivered{sent: true, err: fmt.Sprintf("write to the application failed after %d of %d bytes: %v", n, len(wireBytes), err)}
	}
	failpoint.Hit(FailAfterSend)
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() { br.Reset(nil); readers.Put(br) }()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return delivered{sent: true, err: "read the application's answer: " + err.Error()}
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxResponseBody {
		return delivered{sent: true, err: fmt.Sprintf("the application's answer of %d bytes exceeds the bound of %d bytes", resp.ContentLength, MaxResponseBody)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody+1))
	if err != nil {
		return delivered{sent: true, err: "read the application's answer: " + err.Error()}
	}
	if len(body) > MaxResponseBody {
		return delivered{sent: true, err: fmt.Sprintf("the application's answer exceeds the bound of %d bytes", MaxResponseBody)}
	}
	return delivered{sent: true, status: resp.StatusCode, body: body}
}

// httpRequest renders req as HTTP/1.1 bytes, written in one Write.
func httpRequest(req oracleops.Request) []byte {
	b := make([]byte, 0, 160+len(req.Path)+len(req.Body))
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.Path...)
	b = append(b, " HTTP/1.1\r\nHost: steward\r\nAccept: application/json\r\nConnection: close\r\n"...)
	if req.Body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(req.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, req.Body...)
}

// filterList keeps, in a listing, only the operations grant g covers. Other
// members (next_offset, limits) are kept as the application wrote them.
func filterList(body []byte, g *msg.Grant) ([]byte, error) {
	var reply map[string]json.RawMessage
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, err
	}
	var ops []json.RawMessage
	if err := json.Unmarshal(reply["operations"], &ops); err != nil {
		return nil, err
	}
	kept := make([]json.RawMessage, 0, len(ops))
	for _, op := range ops {
		var id struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(op, &id); err != nil {
			return nil, err
		}
		if id.ID != "" && g.Covers(g.Application, id.ID) {
			kept = append(kept, op)
		}
	}
	enc, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	reply["operations"] = enc
	return json.Marshal(reply)
}
