package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// MaxInFlight bounds the requests Serve runs at once on one channel. Past it
// Serve stops reading until one finishes: a request is delayed, never dropped.
const MaxInFlight = 256

// Handler answers one request. Its reply is sent with the request's id.
type Handler interface {
	ServeFrame(ctx context.Context, req *Envelope) (replyType string, replyBody any)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Envelope) (string, any)

// ServeFrame calls f.
func (f HandlerFunc) ServeFrame(ctx context.Context, req *Envelope) (string, any) { return f(ctx, req) }

// Last is a reply body after which Serve closes the channel: a handler
// that finds its peer no longer entitled to the channel (its account left
// the group that admitted it) answers why, and nothing more is read.
type Last struct{ Body any }

// ErrClosedAfterReply is what Serve returns after a Last reply was sent.
var ErrClosedAfterReply = errors.New("wire: serve: the channel closed after its last reply")

// Serve reads requests from c and runs each in its own goroutine, at most
// MaxInFlight at once, replying with the request's id. It returns the first
// of: the channel's read error (io.EOF when the peer closed cleanly), a reply
// that could not be sent (the channel is closed then: a caller must never
// wait for a reply that was dropped), or ctx's cause when ctx ends. It closes
// c and waits for running handlers before returning; handlers see their
// context cancelled.
func Serve(ctx context.Context, c *Channel, h Handler) error {
	return ServeIdle(ctx, c, h, 0)
}

// ServeIdle is Serve with a read deadline between requests: while no
// request is running, the next one must arrive (whole) within idle of the
// last reply, or of the call, else the channel is closed and ServeIdle
// returns the read's error, which wraps os.ErrDeadlineExceeded. While a
// request runs there is no deadline: the peer is waiting for its reply.
// idle 0 means no deadline.
func ServeIdle(ctx context.Context, c *Channel, h Handler, idle time.Duration) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var (
		once  sync.Once
		first error
	)
	fail := func(err error) {
		once.Do(func() {
			first = err
			cancel(err)
			c.Close()
		})
	}
	stop := context.AfterFunc(ctx, func() { fail(context.Cause(ctx)) })
	defer stop()

	var wg sync.WaitGroup
	sem := make(chan struct{}, MaxInFlight)
	quiet := idleDeadline{conn: c.conn, idle: idle}
	quiet.end(false)
	for {
		req, err := c.Recv()
		if err != nil {
			fail(err)
			break
		}
		if req.ID == "" {
			fail(fmt.Errorf("%w: serve: %q request without an id", ErrMalformed, req.T))
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			// Through fail, so that first is read below only after the
			// once that writes it: ctx may have ended by its parent's
			// cancellation before the AfterFunc's fail ran, which would
			// otherwise write first while it is returned.
			fail(context.Cause(ctx))
			break
		}
		wg.Add(1)
		quiet.begin()
		go func() {
			defer func() { quiet.end(true); <-sem; wg.Done() }()
			t, body := h.ServeFrame(ctx, req)
			last, isLast := body.(Last)
			if isLast {
				body = last.Body
			}
			if err := c.Send(t, req.ID, body); err != nil {
				if rerr := c.recvFailure(); rerr != nil {
					err = rerr // the send failed because the read side already had
				}
				fail(fmt.Errorf("wire: serve: reply %q to id %q: %w", t, req.ID, err))
			} else if isLast {
				fail(ErrClosedAfterReply)
			}
		}()
	}
	wg.Wait()
	return first
}

// idleDeadline keeps a read deadline on conn exactly while no request runs.
type idleDeadline struct {
	conn    net.Conn
	idle    time.Duration
	mu      sync.Mutex
	running int
}

// begin marks a request running: the peer may be silent now.
func (d *idleDeadline) begin() {
	if d.idle <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.running++
	d.conn.SetReadDeadline(time.Time{})
}

// end marks a request done (done false: none was running, the start) and
// arms the deadline when it was the last one.
func (d *idleDeadline) end(done bool) {
	if d.idle <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if done {
		d.running--
	}
	if d.running == 0 {
		d.conn.SetReadDeadline(time.Now().Add(d.idle))
	}
}
