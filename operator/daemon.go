package operator

import (
	"log/slog"
	"time"

	"github.com/stewardrt/steward/operator/hostapi"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// What a running host does for its store, and the values that cross
// between them, are package operator/hostapi's; the store names them so.
// A store a command opened has no daemon: Options.Daemon nil is
// hostapi.Offline, which listens on nothing and pushes nothing.
type (
	// Daemon is what a running host gives the store it serves (Options.Daemon).
	Daemon = hostapi.Daemon
	// Payer obtains the payer's consent to one charge.
	Payer = hostapi.Payer
	// Courier carries one request to an application and its answer back.
	Courier = hostapi.Courier
	// Delivery is what became of one delivery.
	Delivery = hostapi.Delivery
	// Listeners is the running host's sockets for the store's routes and
	// controllers.
	Listeners = hostapi.Listeners
	// ControlChange is a control socket bound for a change not yet applied.
	ControlChange = hostapi.ControlChange
	// Pushes are what the store tells the running host once a record is durable.
	Pushes = hostapi.Pushes
	// AskDecision is what the running host is told of a decided ask.
	AskDecision = hostapi.AskDecision
	// Peer is a pinned controller as a running host binds and dials it.
	Peer = hostapi.Peer
	// PayerRefusal is the controller's own refusal to consent.
	PayerRefusal = hostapi.PayerRefusal
)

// deliverFiltered answers a listing through a grant whose operation
// patterns (or its agent's) hide some operations, over the store's
// daemon (hostapi.Filtered): g says what is covered.
func (s *Store) deliverFiltered(rt *msg.RouteRecord, q oracleops.ListQuery, g listFilter, cutoff time.Time) Delivery {
	return hostapi.Filtered(s.daemon, rt, q, g.keeps, cutoff)
}

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
	return s.st.SelectedRecord(name)
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
