package wire

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
)

// Client carries many calls at once on one channel and matches each reply to
// its call by id. One goroutine reads the channel.
type Client struct {
	ch *Channel

	mu      sync.Mutex
	nextID  uint64
	pending map[string]chan *Envelope // nil value: the caller gave up
	err     error                     // set once the channel failed
	done    chan struct{}             // closed when the reader exits
}

// NewClient starts the reader goroutine on c. The Client owns c from now on.
func NewClient(c *Channel) *Client {
	cl := &Client{ch: c, pending: make(map[string]chan *Envelope), done: make(chan struct{})}
	go cl.read()
	return cl
}

// read delivers replies until the channel fails, then fails every pending call.
func (cl *Client) read() {
	defer close(cl.done)
	for {
		e, err := cl.ch.Recv()
		if err == nil {
			err = cl.deliver(e)
		}
		if err != nil {
			cl.ch.Close()
			cl.mu.Lock()
			if cl.err == nil {
				cl.err = err
			}
			cl.pending = nil
			cl.mu.Unlock()
			return
		}
	}
}

// deliver hands e to its caller. A reply to an id never issued is a protocol
// violation that fails the channel; a reply to a call whose caller gave up is
// logged and dropped, since nobody is left to take it.
func (cl *Client) deliver(e *Envelope) error {
	cl.mu.Lock()
	waiter, ok := cl.pending[e.ID]
	if ok {
		delete(cl.pending, e.ID)
	}
	cl.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("%w: %q reply to id %q, which no call is waiting for", ErrMalformed, e.T, e.ID)
	case waiter == nil:
		slog.Debug("wire: reply after its caller gave up", "type", e.T, "id", e.ID)
	default:
		waiter <- e
	}
	return nil
}

// Call sends a request of type t with a fresh id and waits for the reply with
// the same id. If ctx ends first Call returns ctx's error and the late reply
// is discarded when it comes; if the channel fails every pending Call returns
// the channel's error.
func (cl *Client) Call(ctx context.Context, t string, body any) (*Envelope, error) {
	waiter := make(chan *Envelope, 1)
	cl.mu.Lock()
	if cl.err != nil {
		err := cl.err
		cl.mu.Unlock()
		return nil, err
	}
	cl.nextID++
	id := strconv.FormatUint(cl.nextID, 36)
	cl.pending[id] = waiter
	cl.mu.Unlock()

	if err := cl.ch.Send(t, id, body); err != nil {
		cl.mu.Lock()
		if cl.pending != nil {
			delete(cl.pending, id)
		}
		cl.mu.Unlock()
		return nil, err
	}
	select {
	case e := <-waiter:
		return e, nil
	case <-cl.done:
		select { // the reply may have been delivered just before the failure
		case e := <-waiter:
			return e, nil
		default:
		}
		cl.mu.Lock()
		err := cl.err
		cl.mu.Unlock()
		return nil, err
	case <-ctx.Done():
		cl.mu.Lock()
		if _, still := cl.pending[id]; still {
			cl.pending[id] = nil
		}
		cl.mu.Unlock()
		select {
		case e := <-waiter:
			return e, nil
		default:
		}
		return nil, fmt.Errorf("wire: call %q id %q: %w", t, id, ctx.Err())
	}
}

// Err returns the error that ended the channel, or nil while it is open.
func (cl *Client) Err() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.err
}

// Done is closed when the channel has failed or been closed.
func (cl *Client) Done() <-chan struct{} { return cl.done }

// Close closes the channel and waits for the reader to exit; pending calls
// fail with ErrClosed.
func (cl *Client) Close() error {
	cl.mu.Lock()
	if cl.err == nil {
		cl.err = ErrClosed
	}
	cl.mu.Unlock()
	err := cl.ch.Close()
	<-cl.done
	return err
}
