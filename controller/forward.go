package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// hostChannel is one of the controller's channels to the host: a
// wire.Client on a socket the host listens on, dialled lazily with the
// tool key and redialled when it has failed. A failed dial sends nothing;
// a call that fails after its frame may have left is uncertain and is
// never resent. The forward channel of a route (forward) and the control
// channel (control.go) are each one.
type hostChannel struct {
	c       *Controller
	path    string // the host's socket
	purpose string // msg.PurposeDispatch or msg.PurposeControl
	what    string // names the channel in errors: "route R", "the control socket"

	mu sync.Mutex
	cl *wire.Client
}

// client returns a live client, dialling the host if there is none.
func (h *hostChannel) client(ctx context.Context) (*wire.Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cl != nil {
		if h.cl.Err() == nil {
			return h.cl, nil
		}
		h.cl.Close()
		h.cl = nil
	}
	hostUID := h.c.bind.Bundle.HostUID
	conn, err := wire.Dial(ctx, h.path, hostUID, hostUID)
	if err != nil {
		return nil, err
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: h.c.keys.Tool, Role: msg.RoleControllerTool, PeerRole: msg.RoleHost,
		PeerKeys: h.c.bind.HostRing, Path: h.path, Purpose: h.purpose,
		SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	h.cl = wire.NewClient(ch)
	return h.cl, nil
}

// call sends one request and waits for its reply. sent reports whether the
// request may have left this process: false only when no channel could be
// had or the frame was refused by its bound before writing.
func (h *hostChannel) call(ctx context.Context, t string, body any) (env *wire.Envelope, sent bool, err error) {
	cl, err := h.client(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", h.what, err)
	}
	env, err = cl.Call(ctx, t, body)
	if err != nil {
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return nil, false, err
		}
		return nil, true, err
	}
	return env, true, nil
}

// live reports whether the channel is open and has not failed.
func (h *hostChannel) live() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cl != nil && h.cl.Err() == nil
}

func (h *hostChannel) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cl != nil {
		h.cl.Close()
		h.cl = nil
	}
}

// forward is the controller's channel to the host on one revision of one
// route. The live route table (liveroutes.go) makes it when a dispatch
// first needs it and counts the dispatches using it: once its route has
// left the table it is closed when the last of them ends, never under one.
type forward struct {
	hostChannel
	route msg.RouteRecord

	// users and retired are guarded by the table's mutex (routeTable.mu).
	users   int
	retired bool
}

func newForward(c *Controller, r msg.RouteRecord) *forward {
	return &forward{hostChannel: hostChannel{c: c, path: r.Forward, purpose: msg.PurposeDispatch, what: "route " + r.Route}, route: r}
}
