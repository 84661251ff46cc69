package controller

import (
	"github.com/stewardrt/steward/wire/msg"
)

// The control channel is the controller's one channel to the host that no
// route owns (msg/control.go): the host's socket for this controller,
// named by the bundle (Bundle.Control), dialled lazily with the tool key
// to the bundle's host account and redialled when it has failed, like a
// route's forward channel. It carries the live route table (routes, on
// every tool call that needs a route and every overview: liveroutes.go),
// the host's record of an attempt (inspect: attempts resolve, a call that
// meets an uncertain attempt) and an agent's allowance (the overview's
// limits). A controller with no route still has it.

func newControl(c *Controller) *hostChannel {
	return &hostChannel{c: c, path: c.bind.Bundle.Control, purpose: msg.PurposeControl, what: "the host's control socket"}
}
