package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/stewardrt/steward/internal/failpoint"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Delivery to applications (the store's operator.Courier; DESIGN.md
// section 5, "Delivery"): each delivery dials a fresh connection to the
// route's upstream socket, checked against the route's application
// account when it names one, and writes the whole HTTP/1.1 request with
// "Connection: close" in one Write: zero bytes written with an error is
// not-sent, anything after the first byte is uncertain. The answer is read
// with http.ReadResponse under the route's response deadline, its body
// bounded by MaxResponseBody so the dispatch result fits a reply frame.
// Neither timeout runs past the dispatch's cutoff.

// Deliver sends req to route rt's application and reads its answer
// (operator.Courier).
func (h *Host) Deliver(rt *msg.RouteRecord, req oracleops.Request, cutoff time.Time) operator.Delivery {
	return deliver(rt, req, cutoff)
}

// warnOnce logs a warning the first time key is seen by this host process.
func (h *Host) warnOnce(key, message string, args ...any) {
	if _, seen := h.warned.LoadOrStore(key, true); !seen {
		h.log.Warn(message, args...)
	}
}

// MaxResponseBody bounds an application's answer: it must fit a reply frame
// with the dispatch result around it (attempt, receipt, envelope, signature).
const MaxResponseBody = wire.MaxReplyFrame - 16<<10

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
func deliver(rt *msg.RouteRecord, req oracleops.Request, cutoff time.Time) operator.Delivery {
	connectBy, _ := bound(rt.Timeouts.ConnectMs, cutoff)
	ctx, cancel := context.WithDeadline(context.Background(), connectBy)
	conn, err := dialApplication(ctx, rt)
	cancel()
	if err != nil {
		switch {
		case errors.Is(err, errAppAccount):
			return operator.Delivery{Detail: "the host refused the application's socket: it is not served by the route's application account; nothing was sent", Cause: err}
		case !cutoff.IsZero() && !time.Now().Before(cutoff):
			return operator.Delivery{Detail: "the call's deadline passed before the application could be reached", Cause: err}
		}
		return operator.Delivery{Detail: "the application could not be reached", Cause: err}
	}
	defer conn.Close()
	answerBy, byDeadline := bound(rt.Timeouts.ResponseMs, cutoff)
	if err := conn.SetDeadline(answerBy); err != nil {
		return operator.Delivery{Detail: "the application could not be reached", Cause: err}
	}
	wireBytes := httpRequest(req)
	failpoint.Hit(operator.FailAfterMarkSend)
	n, err := conn.Write(wireBytes)
	if n == 0 && err != nil {
		return operator.Delivery{Detail: "the request could not be written to the application", Cause: err}
	}
	if err != nil {
		return operator.Delivery{Sent: true, Err: fmt.Sprintf("the write to the application failed after %d of %d bytes", n, len(wireBytes)), Cause: err}
	}
	failpoint.Hit(operator.FailAfterSend)
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() { br.Reset(nil); readers.Put(br) }()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return operator.Delivery{Sent: true, Err: answerLost(err, byDeadline), Cause: err}
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxResponseBody {
		return operator.Delivery{Sent: true, Err: fmt.Sprintf("the application's answer of %d bytes exceeds the bound of %d bytes", resp.ContentLength, MaxResponseBody)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody+1))
	if err != nil {
		return operator.Delivery{Sent: true, Err: answerLost(err, byDeadline), Cause: err}
	}
	if len(body) > MaxResponseBody {
		return operator.Delivery{Sent: true, Err: fmt.Sprintf("the application's answer exceeds the bound of %d bytes", MaxResponseBody)}
	}
	return operator.Delivery{Sent: true, Status: resp.StatusCode, Body: body}
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

// errAppAccount wraps every failure of the check that the application's
// socket is served by the route's application account.
var errAppAccount = errors.New("the application's account check failed")

// appUID resolves the route's application account to its uid, from the
// host's account database (os/user), at every dial: an account removed or
// renumbered since the route was loaded is seen at once.
func appUID(rt *msg.RouteRecord) (uint32, error) {
	u, err := user.Lookup(rt.AppAccount)
	if err != nil {
		return 0, fmt.Errorf("%w: route %s: application account %s: %w", errAppAccount, rt.Route, rt.AppAccount, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: route %s: application account %s: uid %q: %w", errAppAccount, rt.Route, rt.AppAccount, u.Uid, err)
	}
	return uint32(uid), nil
}

// dialApplication connects to the route's upstream socket. When the route
// names the application's account, the socket is checked as wire checks
// every custody socket (wire.Dial): a socket owned by that account's uid,
// under directories without symlinks that only root, the host or that
// account can change, and after connecting SO_PEERCRED must name that uid.
// A failed check wraps errAppAccount and names the path (for the host's log
// only). A route without an account is dialled unchecked, as before
// accounts were recorded (the host warned once when it loaded the route).
func dialApplication(ctx context.Context, rt *msg.RouteRecord) (net.Conn, error) {
	if rt.AppAccount == "" {
		var d net.Dialer
		return d.DialContext(ctx, "unix", rt.Upstream)
	}
	uid, err := appUID(rt)
	if err != nil {
		return nil, err
	}
	conn, err := wire.Dial(ctx, rt.Upstream, uid, uid)
	switch {
	case err == nil:
		return conn, nil
	case errors.Is(err, fs.ErrNotExist), !errors.Is(err, wire.ErrUnsafePath) && !errors.Is(err, wire.ErrWrongPeer):
		return nil, err // not there, or not listening: not reached
	default:
		return nil, fmt.Errorf("%w: route %s: application account %s (uid %d): %w", errAppAccount, rt.Route, rt.AppAccount, uid, err)
	}
}

// checkRouteAccount logs, as the host listens for route rt, what it will
// check of its application: a route without an application account is
// dialled unchecked (a warning, once), and one whose account does not
// resolve now has its calls end not-sent until it does (an error; the
// host still serves its other routes, and the account may be made later).
func (h *Host) checkRouteAccount(rt msg.RouteRecord) {
	if rt.AppAccount == "" {
		h.warnOnce("unchecked/"+rt.Route, "steward-operator: route names no application account: its upstream socket is dialled unchecked (no owner, path or SO_PEERCRED check); register a new revision with appAccount",
			"route", rt.Route, "application", rt.Application, "upstream", rt.Upstream)
		return
	}
	if _, err := appUID(&rt); err != nil {
		h.log.Error("steward-operator: the route's application account does not resolve; its calls end not-sent until it does", "route", rt.Route, "err", err)
	}
}
