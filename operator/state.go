package operator

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/operator/routetable"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// state is the operator's state rebuilt from the journal. Store.mu guards it.
type state struct {
	Controllers map[string]*controller
	CtrlOrder   []string
	Grants      map[string]*grant
	GrantOrder  []string
	Attempts    map[string]*attempt
	Agents      map[agentKey]*agentLimits // the operator's limits per agent (agent_records.go)
	AgentOrder  []agentKey
	AgentUse    map[agentKey]*agentUse // each agent's counts of its latest day (agentlimits.go)
	Ledger      uint64                 // last ledger number used

	routetable.Table // the routes and their states (package operator/routetable)

	// Latest is the Latest wall time (unix ms) the store has recorded or
	// read: replay raises it to every record's time and every reservation's
	// day, Store.clock to every reading. clockBack is set while readings
	// are behind it (so that going back is logged once).
	Latest    int64
	clockBack bool

	// The receipt chain: signed is the last receipt signed (in memory),
	// durable the highest sequence up to which every receipt is durable.
	SignedSeq   uint64
	SignedHead  []byte
	DurableSeq  uint64
	DurableHead []byte
	Pending     map[uint64][]byte // durable receipts above durableSeq, by seq
	Checkpoint  uint64            // receipt seq of the last durable checkpoint

	askState // the asks and their events (asks.go)

	// hist is the store's history index, which what ended leaves the
	// state for (history.go); nil for a store opened read-only while the
	// host runs, whose state then keeps what it replays. Forgotten counts
	// the attempts that left the state so, by state.
	hist      *hosthist.Index
	Forgotten map[msg.State]uint64
}

func newState() *state {
	return &state{
		Controllers: map[string]*controller{},
		Grants:      map[string]*grant{},
		Table:       routetable.New(),
		Attempts:    map[string]*attempt{},
		Agents:      map[agentKey]*agentLimits{},
		AgentUse:    map[agentKey]*agentUse{},
		SignedHead:  make([]byte, 32),
		DurableHead: make([]byte, 32),
		Pending:     map[uint64][]byte{},
		askState:    newAskState(),
		Forgotten:   map[msg.State]uint64{},
	}
}

// controller is a pinned controller and its purse.
type controller struct {
	Name     string
	UID      uint32
	Keys     []byte // msg.ControllerKeys CBOR, as added
	tool     *wire.PublicKey
	dispatch *wire.PublicKey
	toolRing *wire.Keyring
	dispRing *wire.Keyring
	Purse    purse
	// Control is the controller's Control socket (Control.go); empty for
	// one added before it was recorded, until `controller Control`.
	Control string
}

// peer is c as the running host binds and dials it.
func (c *controller) peer() Peer {
	return Peer{Name: c.Name, UID: c.UID, Tool: c.toolRing, Dispatch: c.dispRing}
}

// purse is a controller's credit. balance() is what the ledger says;
// holds are reservations admitted but not yet journaled (waiting for the
// payer's consent).
type purse struct {
	Funded  uint64
	Charged uint64 // charges of reserve records not released
	Holds   uint64
	Frozen  bool
}

func (p *purse) balance() uint64 { return p.Funded - p.Charged }

func (p *purse) available() uint64 {
	b := p.balance()
	if p.Holds > b {
		return 0
	}
	return b - p.Holds
}

// grant is a verified, operator-signed grant and its daily use.
type grant struct {
	Grant   msg.Grant
	Signed  []byte
	Revoked bool
	Day     int64  // the UTC day count counts
	Count   uint64 // admitted requests on day (holds included)
}

// attempt is the host's memory of one dispatch attempt.
type attempt struct {
	ID         string
	Controller string
	// Application is the reservation's: a route is not removed while an
	// attempt of its Application is unresolved (routes.go).
	Application string
	Grant       string
	Charge      uint64
	Day         int64
	State       msg.State // or stateAdmitting before anything is durable
	// First is the seq of the attempt's first record (its ask, reserve or
	// refused record): attempts are listed in its order, and a replay
	// that finds the attempt in the history index from this very record
	// is replaying it again, not meeting a duplicate (history.go).
	First uint64
	// EndAt is where the record that ended the attempt with a receipt
	// is (an outcome, not-sent, refused or resolve record), zero while it
	// has none.
	EndAt  journal.Place
	Detail string
	// ReserveAt is where the attempt's reserve record is, which
	// holds the request bytes a redelivery sends (read back from the
	// journal, never kept in memory). resolving marks an operator's
	// resolution under way; resolution is the line a redelivery adds to
	// inspect (see attempts.go).
	ReserveAt  journal.Place
	resolving  bool
	Resolution string
	// RedeliveredBy is the account of the last redeliver record ("uid:N"):
	// the resolver an answer to a redelivery names in its receipt.
	RedeliveredBy string
	// Agent and conversation are the dispatch's (empty when it named
	// none): a release gives back their counts (agentlimits.go).
	Agent        string
	Conversation string
	// Ask is the Ask the attempt went through (asks.go), answeredBy who
	// decided it: every receipt of the attempt names both. Empty for a
	// call to an operation not marked for approval.
	Ask        string
	AnsweredBy string
	// collecting is set while a collect goes on with the attempt's
	// verdict (ask_dispatch.go): a second collect is refused.
	collecting bool
}

// stateAdmitting marks an attempt being admitted: nothing durable yet, so
// inspect answers not-seen, but a second dispatch with its id is a duplicate.
const stateAdmitting msg.State = "admitting"

// checkControllerAdd checks a controller-add record and builds the controller.
func (st *state) checkControllerAdd(r hostlog.ControllerAddV2) (*controller, error) {
	if err := hostlog.ValidName("controller", r.Name); err != nil {
		return nil, refusedInput(err)
	}
	if _, ok := st.Controllers[r.Name]; ok {
		return nil, views.Refusedf("controller %s is already pinned", r.Name)
	}
	if r.Control != "" {
		if err := st.checkControlSocket(r.Name, r.Control); err != nil {
			return nil, err
		}
	}
	c := &controller{Name: r.Name, UID: r.UID, Keys: r.Keys, Control: r.Control}
	if err := c.parseKeys(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseKeys parses the controller's keys (msg.ControllerKeys CBOR) into
// the tool and dispatch keys its channels and consents are checked with,
// refusing keys that do not parse.
func (c *controller) parseKeys() error {
	var ck msg.ControllerKeys
	if err := wire.Unmarshal(c.Keys, &ck); err != nil {
		return views.Refusedf("controller keys: %v", err)
	}
	tool, err := wire.ParsePublicKey(ck.Tool)
	if err != nil {
		return views.Refusedf("controller keys: tool key: %v", err)
	}
	disp, err := wire.ParsePublicKey(ck.Dispatch)
	if err != nil {
		return views.Refusedf("controller keys: dispatch key: %v", err)
	}
	for _, k := range [][]byte{ck.Controller, ck.Provider} {
		if _, err := wire.ParsePublicKey(k); err != nil {
			return views.Refusedf("controller keys: %v", err)
		}
	}
	c.tool, c.dispatch, c.toolRing, c.dispRing = tool, disp, wire.NewKeyring(tool), wire.NewKeyring(disp)
	return nil
}

// checkControlSocket checks the control socket path of controller name:
// a clean absolute socket path that no other controller's control socket
// and no route's socket already is.
func (st *state) checkControlSocket(name, path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return views.Refusedf("controller %s: control socket %s must be a clean absolute path", name, strconv.Quote(hostlog.Trunc(path, 120)))
	}
	if len(path) > hostlog.MaxPathLen {
		return views.Refusedf("controller %s: control socket path of %d bytes exceeds the bound of %d", name, len(path), hostlog.MaxPathLen)
	}
	for _, other := range st.CtrlOrder {
		if other != name && st.Controllers[other].Control == path {
			return views.Refusedf("controller %s: control socket %s is controller %s's", name, path, other)
		}
	}
	if rn := st.SocketOf(path); rn != "" {
		return views.Refusedf("controller %s: control socket %s is a socket of route %s", name, path, rn)
	}
	return nil
}

// checkControllerControl checks a controller-control record: the
// controller exists and the path is a control socket it may have.
func (st *state) checkControllerControl(r hostlog.ControllerControl) (*controller, error) {
	c, err := st.controller(r.Controller)
	if err != nil {
		return nil, err
	}
	if err := st.checkControlSocket(c.Name, r.Control); err != nil {
		return nil, err
	}
	return c, nil
}

// controlSocketOwner names the controller whose control socket path is,
// or "".
func (st *state) controlSocketOwner(path string) string {
	for _, n := range st.CtrlOrder {
		if st.Controllers[n].Control == path {
			return n
		}
	}
	return ""
}

func (st *state) addController(c *controller) {
	st.Controllers[c.Name] = c
	st.CtrlOrder = append(st.CtrlOrder, c.Name)
}

func (st *state) controller(name string) (*controller, error) {
	c, ok := st.Controllers[name]
	if !ok {
		return nil, views.Refusedf("no controller named %s", name)
	}
	return c, nil
}

// checkGrant verifies a signed grant for the store.
func (st *state) checkGrant(signed []byte, pub *wire.HybridPublicKey) (msg.Grant, error) {
	g, err := msg.VerifyGrant(signed, pub)
	if err != nil {
		return g, views.Refusedf("%v", err)
	}
	if err := hostlog.ValidName("grant id", g.ID); err != nil {
		return g, refusedInput(err)
	}
	if _, ok := st.Grants[g.ID]; ok {
		return g, views.Refusedf("grant %s already exists", g.ID)
	}
	if _, ok := st.Controllers[g.Controller]; !ok {
		return g, views.Refusedf("grant %s: no controller named %s", g.ID, g.Controller)
	}
	if err := hostlog.ValidName("application", g.Application); err != nil {
		return g, refusedInput(err)
	}
	if err := hostlog.ValidPatterns(g.Operations); err != nil {
		return g, refusedInput(err)
	}
	if g.PerDay == 0 {
		return g, views.Refusedf("grant %s: per-day count must be at least 1", g.ID)
	}
	if g.RefusalPrice > g.Price {
		return g, views.Refusedf("grant %s: refusal price %d is above the price %d: a refusal never costs more than an answer", g.ID, g.RefusalPrice, g.Price)
	}
	if g.NotAfter <= g.NotBefore {
		return g, views.Refusedf("grant %s: not-after is not after not-before", g.ID)
	}
	return g, nil
}

func (st *state) addGrant(g msg.Grant, signed []byte) {
	st.Grants[g.ID] = &grant{Grant: g, Signed: signed}
	st.GrantOrder = append(st.GrantOrder, g.ID)
}

// checkRoute checks a signed route revision against the state
// (Table.Check): its controller is pinned, and its forward socket is no
// controller's control socket.
func (st *state) checkRoute(signed []byte, pub *wire.HybridPublicKey) (msg.RouteRecord, []byte, error) {
	return st.Check(signed, pub, func(c string) bool { _, ok := st.Controllers[c]; return ok }, st.controlSocketOwner)
}

// markDurable records that receipt seq (hash head) is durable and advances
// the contiguous durable head.
func (st *state) markDurable(seq uint64, head []byte) {
	st.Pending[seq] = head
	for {
		h, ok := st.Pending[st.DurableSeq+1]
		if !ok {
			return
		}
		delete(st.Pending, st.DurableSeq+1)
		st.DurableSeq++
		st.DurableHead = h
	}
}

// recordError names a journal record that Open could not apply.
func recordError(seq uint64, kind string, err error) error {
	return fmt.Errorf("host journal record %d (%s): %w", seq, kind, err)
}
