package operator

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// What a running host does for its store. The store decides (admission,
// reservations, receipts, asks, route and controller changes) and the
// daemon (package host) carries: it asks the payer over the reverse
// channel, delivers to the application over its socket, holds the
// listeners a change needs, and pushes what the store tells it. The store never reaches a socket of the daemon's; the daemon
// never reads the store's state but through its methods. A store a
// command opened has no daemon: Options.Daemon nil is offline, which
// listens on nothing and pushes nothing.

// Daemon is what a running host gives the store it serves (Options.Daemon).
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
	// alone). It hits FailAfterMarkSend just before the first byte and
	// FailAfterSend once the request is written.
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
	// routes (Store.ActiveRoutes), using what PrepareRoute opened and
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

// Options configure OpenWith.
type Options struct {
	// Now is the wall clock, the store's only source of wall time (the
	// days that per-day limits count, the times grants are valid at,
	// receipts' and checkpoints' times); time.Now when nil. The store never
	// lets it run backwards (Store.clock). Tests inject one.
	Now func() time.Time
	// Logger is where the store logs refusals' details, ask events and
	// the clock going back; slog.Default() when nil.
	Logger *slog.Logger
	// Daemon is the running host serving the store; nil for a store a
	// command opened, which listens on nothing and has no payer.
	Daemon Daemon
	// SnapshotEvery is how many records the store's history makes a
	// snapshot after (package journal/history's default when 0).
	SnapshotEvery uint64
	// AskBounds are the operator's caps on the asks pending at once; a
	// zero field is its default.
	AskBounds views.AskBounds
}

// errNoHost is the payer of a store no host serves.
var errNoHost = errors.New("no host serves this store")

// offline is the Daemon of a store a command opened: no sockets, no
// payer, nothing to push.
type offline struct{}

func (offline) Consent(context.Context, *msg.RouteRecord, Peer, msg.Reserve) ([]byte, error) {
	return nil, errNoHost
}
func (offline) Deliver(*msg.RouteRecord, oracleops.Request, time.Time) Delivery {
	return Delivery{Detail: "no host serves this store; nothing was sent", Cause: errNoHost}
}
func (offline) PrepareRoute(msg.RouteRecord) error                 { return nil }
func (offline) SettleRoutes() error                                { return nil }
func (offline) PrepareControl(Peer, string) (ControlChange, error) { return noChange{}, nil }
func (offline) ReceiptDurable()                                    {}
func (offline) AskDecided(AskDecision)                             {}

// noChange is a ControlChange that does nothing.
type noChange struct{}

func (noChange) Commit()  {}
func (noChange) Discard() {}

// What a running host reads of the store to listen and dial: each is a
// copy made under the store's lock, whose bytes the state never changes.

// Peer returns the pinned controller name, as the host binds and dials it.
func (s *Store) Peer(name string) (Peer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.st.Controllers[name]
	if !ok {
		return Peer{}, false
	}
	return c.peer(), true
}

// ControlSocket is a controller's control socket, as the host listens on it.
type ControlSocket struct {
	Peer
	Path string
}

// ControlSockets lists the control socket of every controller that has
// one, in the order the controllers were added: a controller added by an
// older controller-add record has none until `steward-operator controller
// control`.
func (s *Store) ControlSockets() []ControlSocket {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ControlSocket
	for _, n := range s.st.CtrlOrder {
		if c := s.st.Controllers[n]; c.Control != "" {
			out = append(out, ControlSocket{Peer: c.peer(), Path: c.Control})
		}
	}
	return out
}

// ActiveRoutes is the selected revision of every active route, of every
// controller in the order they were added and each controller's in the
// host's route order: what the host listens on.
func (s *Store) ActiveRoutes() []msg.RouteRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []msg.RouteRecord
	for _, c := range s.st.CtrlOrder {
		for _, rv := range s.st.Active(c) {
			out = append(out, rv.Record)
		}
	}
	return out
}

// SelectedRoute is route name's selected revision, whatever its state:
// the route an ask's verdict is pushed on.
func (s *Store) SelectedRoute(name string) (msg.RouteRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.Routes[name]
	if r == nil {
		return msg.RouteRecord{}, false
	}
	return r.Selected().Record, true
}

// RouteTable is controller's live route table (msg.RoutesResult): the
// RouteIDs of its active routes in the host's order, and the signed
// records of those known does not hold. Routes of other controllers are
// never in it.
func (s *Store) RouteTable(controller string, known map[string]bool) msg.RoutesResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.ForController(controller, known)
}
