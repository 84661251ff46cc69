package hostapi

import (
	"context"
	"errors"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Daemon is what a running host gives the store it serves
// (operator.Options.Daemon).
type Daemon interface {
	Payer
	Courier
	Listeners
	Pushes
}

// Payer obtains the payer's consent to one charge.
type Payer interface {
	// Consent sends reserve r to controller peer, the controller of route
	// rt, and returns the signed consent it answered, as it came: the
	// store verifies it against peer's pinned dispatch key. It returns a
	// *PayerRefusal when the controller refused, another error when no
	// consent came before ctx ended.
	Consent(ctx context.Context, rt *msg.RouteRecord, peer Peer, r msg.Reserve) ([]byte, error)
}

// Courier carries one request to an application and its answer back.
type Courier interface {
	// Deliver sends req to route rt's application over a fresh connection
	// and reads its answer, none of it running past cutoff (the dispatch's
	// deadline plus msg.DeadlineTolerance; zero: the route's timeouts
	// alone). It hits operator.FailAfterMarkSend just before the first byte
	// and operator.FailAfterSend once the request is written.
	Deliver(rt *msg.RouteRecord, req oracleops.Request, cutoff time.Time) Delivery
}

// Delivery is what became of one delivery. Detail and Err reach the
// agent, so they say what failed in the protocol's terms; Cause, which may
// name the application's socket, goes to the host's log only.
type Delivery struct {
	Sent   bool   // at least one byte of the request was written
	Detail string // why it was not sent
	Err    string // why the answer was not received (Sent is true)
	Cause  error  // the error behind Detail or Err
	Status int
	Body   []byte
}

// Listeners is the running host's sockets for the store's routes and
// controllers. A change that needs a socket has it opened before its
// record is appended, so that a socket the host cannot listen on refuses
// the change with nothing journaled, and takes effect once it is applied.
type Listeners interface {
	// PrepareRoute opens the forward listener route revision rec will
	// need once the change under way is applied (not yet accepting).
	PrepareRoute(rec msg.RouteRecord) error
	// SettleRoutes matches the forward listeners to the store's active
	// routes (operator.Store.ActiveRoutes), using what PrepareRoute opened and
	// closing what it opened and no route needs; it returns what it could
	// not open.
	SettleRoutes() error
	// PrepareControl binds path as controller peer's control socket (not
	// yet accepting), or returns a change that does nothing when peer's
	// socket is listened on at path already.
	PrepareControl(peer Peer, path string) (ControlChange, error)
}

// ControlChange is a control socket bound for a change not yet applied.
type ControlChange interface {
	// Commit serves it as its controller's control socket, then closes
	// the one it replaces.
	Commit()
	// Discard closes it: the change was not journaled.
	Discard()
}

// Pushes are what the store tells the running host once a record is
// durable. Each is called without the store's locks held.
type Pushes interface {
	// ReceiptDurable says a receipt's record is in the journal: the
	// checkpointer has a head to sign.
	ReceiptDurable()
	// AskDecided says an ask was answered or expired: the host pushes the
	// verdict to the controller, whose call may be parked on it.
	AskDecided(AskDecision)
}

// AskDecision is what the running host is told of an ask once its answer
// or expiry is durable: enough to push the verdict to the controller.
type AskDecision struct {
	Attempt, Ask, Route, Controller string
	State                           msg.AskState
}

// Peer is a pinned controller as a running host binds and dials it: its
// account and the keys its channels are signed with.
type Peer struct {
	Name string
	UID  uint32
	// Tool checks its forward and control channels' frames.
	Tool *wire.Keyring
	// Dispatch checks its reverse channel's frames and its consents.
	Dispatch *wire.Keyring
}

// PayerRefusal is the controller's own refusal to consent, as the reverse
// channel answered it.
type PayerRefusal struct{ Refusal msg.Refusal }

// Error says the controller refused, in its own words.
func (e *PayerRefusal) Error() string { return "the controller refused: " + e.Refusal.Error() }

// errNoHost is the payer of a store no host serves.
var errNoHost = errors.New("no host serves this store")

// Offline is the Daemon of a store a command opened: no sockets, no
// payer, nothing to push.
type Offline struct{}

// Consent refuses: no host serves the store, so no payer is reached.
func (Offline) Consent(context.Context, *msg.RouteRecord, Peer, msg.Reserve) ([]byte, error) {
	return nil, errNoHost
}

// Deliver sends nothing: no host serves the store.
func (Offline) Deliver(*msg.RouteRecord, oracleops.Request, time.Time) Delivery {
	return Delivery{Detail: "no host serves this store; nothing was sent", Cause: errNoHost}
}

// PrepareRoute opens nothing: there is nothing to listen with.
func (Offline) PrepareRoute(msg.RouteRecord) error { return nil }

// SettleRoutes listens on nothing.
func (Offline) SettleRoutes() error { return nil }

// PrepareControl binds nothing.
func (Offline) PrepareControl(Peer, string) (ControlChange, error) { return noChange{}, nil }

// ReceiptDurable pushes nothing.
func (Offline) ReceiptDurable() {}

// AskDecided pushes nothing.
func (Offline) AskDecided(AskDecision) {}

// noChange is a ControlChange that does nothing.
type noChange struct{}

func (noChange) Commit()  {}
func (noChange) Discard() {}
