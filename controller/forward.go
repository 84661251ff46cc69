package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// forward is the controller's channel to the host on one route: one
// wire.Client, dialled lazily and redialled when it has failed. A failed
// dial sends nothing; a call that fails after its frame may have left is
// uncertain and is never resent.
type forward struct {
	route msg.RouteRecord
	c     *Controller

	mu sync.Mutex
	cl *wire.Client
}

// client returns a live client, dialling the host if there is none.
func (f *forward) client(ctx context.Context) (*wire.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cl != nil {
		if f.cl.Err() == nil {
			return f.cl, nil
		}
		f.cl.Close()
		f.cl = nil
	}
	hostUID := f.c.bind.Bundle.HostUID
	conn, err := wire.Dial(ctx, f.route.Forward, hostUID, hostUID)
	if err != nil {
		return nil, err
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: f.c.keys.Tool, Role: msg.RoleControllerTool, PeerRole: msg.RoleHost,
		PeerKeys: f.c.bind.HostRing, Path: f.route.Forward, Purpose: msg.PurposeDispatch,
		SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	f.cl = wire.NewClient(ch)
	return f.cl, nil
}

// call sends one request and waits for its reply. sent reports whether the
// request may have left this process: false only when no channel could be
// had or the frame was refused by its bound before writing.
func (f *forward) call(ctx context.Context, t string, body any) (env *wire.Envelope, sent bool, err error) {
	cl, err := f.client(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("route %s: %w", f.route.Route, err)
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

// reachable reports whether a channel to the host can be had now.
func (f *forward) reachable(ctx context.Context) bool {
	_, err := f.client(ctx)
	return err == nil
}

func (f *forward) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cl != nil {
		f.cl.Close()
		f.cl = nil
	}
}
