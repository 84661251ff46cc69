package operator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

// delivered is what became of one delivery. detail and err reach the
// agent, so they say what failed in the protocol's terms; cause, which may
// name the application's socket, goes to the host's log only.
type delivered struct {
	sent   bool   // at least one byte of the request was written
	detail string // why it was not sent
	err    string // why the answer was not received (sent is true)
	cause  error  // the error behind detail or err
	status int
	body   []byte
}

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// deliver sends req to the application over a fresh connection to the
// route's upstream socket and reads its answer. Up to the first byte written
// a failure is "not sent"; from then on it is uncertain. A fresh connection
// per delivery keeps that line exact: a kept-alive connection the server
// closed would turn a not-sent into a false uncertain.
//
// Nothing of it runs past cutoff (the dispatch's deadline plus
// msg.DeadlineTolerance; zero when the dispatch has none): the connect timeout is
// the route's or the time left, whichever is sooner, and so is the
// response timeout.
func deliver(rt *msg.RouteRecord, req oracleops.Request, cutoff time.Time) delivered {
	connectBy, _ := bound(rt.Timeouts.ConnectMs, cutoff)
	ctx, cancel := context.WithDeadline(context.Background(), connectBy)
	conn, err := dialApplication(ctx, rt)
	cancel()
	if err != nil {
		switch {
		case errors.Is(err, errAppAccount):
			return delivered{detail: "the host refused the application's socket: it is not served by the route's application account; nothing was sent", cause: err}
		case !cutoff.IsZero() && !time.Now().Before(cutoff):
			return delivered{detail: "the call's deadline passed before the application could be reached", cause: err}
		}
		return delivered{detail: "the application could not be reached", cause: err}
	}
	defer conn.Close()
	answerBy, byDeadline := bound(rt.Timeouts.ResponseMs, cutoff)
	if err := conn.SetDeadline(answerBy); err != nil {
		return delivered{detail: "the application could not be reached", cause: err}
	}
	wireBytes := httpRequest(req)
	failpoint.Hit(FailAfterMarkSend)
	n, err := conn.Write(wireBytes)
	if n == 0 && err != nil {
		return delivered{detail: "the request could not be written to the application", cause: err}
	}
	if err != nil {
		return delivered{sent: true, err: fmt.Sprintf("the write to the application failed after %d of %d bytes", n, len(wireBytes)), cause: err}
	}
	failpoint.Hit(FailAfterSend)
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() { br.Reset(nil); readers.Put(br) }()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return delivered{sent: true, err: answerLost(err, byDeadline), cause: err}
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxResponseBody {
		return delivered{sent: true, err: fmt.Sprintf("the application's answer of %d bytes exceeds the bound of %d bytes", resp.ContentLength, MaxResponseBody)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody+1))
	if err != nil {
		return delivered{sent: true, err: answerLost(err, byDeadline), cause: err}
	}
	if len(body) > MaxResponseBody {
		return delivered{sent: true, err: fmt.Sprintf("the application's answer exceeds the bound of %d bytes", MaxResponseBody)}
	}
	return delivered{sent: true, status: resp.StatusCode, body: body}
}

// bound is the sooner of the route's timeout of ms from now and cutoff
// (zero: none), and whether it is the cutoff.
func bound(ms int64, cutoff time.Time) (time.Time, bool) {
	by := time.Now().Add(time.Duration(ms) * time.Millisecond)
	if !cutoff.IsZero() && cutoff.Before(by) {
		return cutoff, true
	}
	return by, false
}

// answerLost says why an answer could not be read: the call's deadline
// when the read ran into it, else a failed read.
func answerLost(err error, byDeadline bool) string {
	var ne net.Error
	if byDeadline && errors.As(err, &ne) && ne.Timeout() {
		return "the call's deadline passed before the application answered"
	}
	return "the application's answer could not be read"
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

// maxFilteredPages bounds the application's pages one filtered listing
// reads: oracleops.MaxLimit operations a page.
const maxFilteredPages = 20

// errListTooLong refuses a filtered listing longer than maxFilteredPages.
var errListTooLong = fmt.Errorf("the application lists more than %d operations", maxFilteredPages*oracleops.MaxLimit)

// listPage is one page of an application's listing, as filtering reads it.
type listPage struct {
	Limits     json.RawMessage   `json:"limits"`
	NextOffset *int              `json:"next_offset"`
	Operations []json.RawMessage `json:"operations"`
}

// deliverFiltered answers a listing through grant g, whose operation
// patterns (or its agent's) hide some operations, without revealing what they hid: it reads
// the application's listing from its start (the agent's search text and
// availability, pages of oracleops.MaxLimit), keeps the covered operations,
// and pages over those itself. The agent's offset and limit count covered
// operations only, and next_offset is computed over them, so neither the
// offsets nor the page sizes let an agent count hidden operations. The
// first page's delivery decides not-sent; every page's delivery ends by
// cutoff (the dispatch's deadline plus msg.DeadlineTolerance); a later page that fails makes
// the listing uncertain, and an answer other than 200 is passed on as it is.
func deliverFiltered(rt *msg.RouteRecord, q oracleops.ListQuery, g listFilter, cutoff time.Time) delivered {
	if q.Limit == 0 {
		q.Limit = oracleops.DefaultLimit
	}
	var kept []json.RawMessage
	var limits json.RawMessage
	appOffset := 0
	for page := 0; ; page++ {
		if page == maxFilteredPages {
			return delivered{sent: true, status: http.StatusBadGateway, body: filterFault("the application's listing is too long to filter by the grant"), cause: errListTooLong}
		}
		req, err := oracleops.BuildList(rt.Prefix, oracleops.ListQuery{Query: q.Query, Availability: q.Availability, Limit: oracleops.MaxLimit, Offset: appOffset})
		if err != nil {
			return delivered{sent: page > 0, detail: "the listing could not be paged", err: "the listing could not be paged", cause: err}
		}
		dl := deliver(rt, req, cutoff)
		if !dl.sent && page > 0 {
			dl.sent, dl.err = true, "a later page of the listing: "+dl.detail
		}
		if !dl.sent || dl.err != "" || dl.status != http.StatusOK {
			return dl
		}
		p, covered, err := filterPage(dl.body, g)
		if err != nil {
			return delivered{sent: true, status: http.StatusBadGateway, body: filterFault("the application's listing could not be filtered by the grant"), cause: err}
		}
		limits = p.Limits
		kept = append(kept, covered...)
		if len(kept) > q.Offset+q.Limit || p.NextOffset == nil {
			break
		}
		if *p.NextOffset <= appOffset {
			return delivered{sent: true, status: http.StatusBadGateway, body: filterFault("the application's listing could not be filtered by the grant"),
				cause: fmt.Errorf("next_offset %d does not advance past offset %d", *p.NextOffset, appOffset)}
		}
		appOffset = *p.NextOffset
	}
	out := listPage{Limits: limits, Operations: []json.RawMessage{}}
	if q.Offset < len(kept) {
		out.Operations = kept[q.Offset:min(len(kept), q.Offset+q.Limit)]
	}
	if len(kept) > q.Offset+q.Limit {
		next := q.Offset + q.Limit
		out.NextOffset = &next
	}
	body, err := json.Marshal(out)
	if err != nil {
		return delivered{sent: true, status: http.StatusBadGateway, body: filterFault("the application's listing could not be filtered by the grant"), cause: err}
	}
	return delivered{sent: true, status: http.StatusOK, body: body}
}

// filterPage parses one page of an application's listing and keeps the
// operations grant g covers.
func filterPage(body []byte, g listFilter) (listPage, []json.RawMessage, error) {
	var p listPage
	if err := json.Unmarshal(body, &p); err != nil {
		return p, nil, err
	}
	kept := make([]json.RawMessage, 0, len(p.Operations))
	for _, op := range p.Operations {
		var id struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(op, &id); err != nil {
			return p, nil, err
		}
		if id.ID != "" && g.keeps(id.ID) {
			kept = append(kept, op)
		}
	}
	return p, kept, nil
}

// filterFault is the body of a listing the host will not pass on: never an
// unfiltered listing, which would show operations the grant does not cover.
func filterFault(message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "fault", "message": "steward: " + message}})
	return b
}
