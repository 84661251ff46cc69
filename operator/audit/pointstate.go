package audit

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// pointState is what a journalAudit carries, as a point holds it: every
// list in a fixed order (journal, chain or ledger order, or by name), so
// that the same state encodes to the same bytes.
type pointState struct {
	Records     uint64            `cbor:"records"`
	Controllers []pointController `cbor:"controllers"` // in the order they were added
	Reserves    []pointReserve    `cbor:"reserves"`    // open, in journal order
	Chain       pointChain        `cbor:"chain"`
	Ledger      pointLedger       `cbor:"ledger"`
	Purses      []pointPurse      `cbor:"purses"` // by controller name
	Agents      []AgentReport     `cbor:"agents"` // in the order of their first receipts
	Limits      [][]byte          `cbor:"limits"` // the signed agent-limits records in force, by agent
	Asks        []pointAsk        `cbor:"asks"`   // not done, in journal order
	// Principals is each controller's first receipt naming an agent
	// (principals.go), by controller name; omitted when none, so a point
	// taken before it keeps its bytes.
	Principals []pointPrincipal `cbor:"principals,omitempty"`
}

type pointController struct {
	Name     string `cbor:"name"`
	Dispatch []byte `cbor:"dispatch"` // its dispatch public key's encoding
}

type pointReserve struct {
	Reserve       hostlog.Reserve `cbor:"reserve"`
	Seq           uint64          `cbor:"seq"`
	Detail        string          `cbor:"detail"`
	RedeliveredBy string          `cbor:"redeliveredBy"`
}

type pointChain struct {
	Linked      uint64            `cbor:"linked"`
	Head        []byte            `cbor:"head"`
	Pending     []pointReceipt    `cbor:"pending"` // by receipt seq
	Recent      [][]byte          `cbor:"recent"`
	RecentFirst uint64            `cbor:"recentFirst"`
	Checkpoints uint64            `cbor:"checkpoints"`
	Covered     uint64            `cbor:"covered"`
	CoveringAt  int64             `cbor:"coveringAt"`
	CoverHead   []byte            `cbor:"coverHead"` // the covered receipt's hash
	Early       []pointCheckpoint `cbor:"early"`     // in journal order
}

type pointReceipt struct {
	Signed []byte `cbor:"signed"`
	Record uint64 `cbor:"record"`
}

type pointCheckpoint struct {
	Signed []byte `cbor:"signed"`
	Record uint64 `cbor:"record"`
}

type pointLedger struct {
	Settled uint64       `cbor:"settled"`
	Max     uint64       `cbor:"max"`
	Claimed []pointClaim `cbor:"claimed"` // by number
}

type pointClaim struct {
	N      uint64 `cbor:"n"`
	Record uint64 `cbor:"record"`
}

type pointPurse struct {
	Controller string       `cbor:"controller"`
	Funded     uint64       `cbor:"funded"`
	Charged    uint64       `cbor:"charged"`
	Receipts   uint64       `cbor:"receipts"`
	Receipted  uint64       `cbor:"receipted"`
	Balance    int64        `cbor:"balance"`
	Folded     uint64       `cbor:"folded"`
	Events     []pointEvent `cbor:"events"` // by ledger number
	Checks     []pointCheck `cbor:"checks"` // by ledger number
}

type pointEvent struct {
	Ledger uint64 `cbor:"ledger"`
	Delta  int64  `cbor:"delta"`
	Kind   int    `cbor:"kind"`
}

type pointCheck struct {
	Ledger  uint64 `cbor:"ledger"`
	Balance uint64 `cbor:"balance"`
	Seq     uint64 `cbor:"seq"`
	Record  uint64 `cbor:"record"`
}

type pointAsk struct {
	ID         string `cbor:"id"`
	Attempt    string `cbor:"attempt"`
	Seq        uint64 `cbor:"seq"`
	Decided    bool   `cbor:"decided"`
	Verdict    string `cbor:"verdict"`
	AnsweredBy string `cbor:"answeredBy"`
	Ended      bool   `cbor:"ended"`
}

// state is what a carries, to be a point: it must carry no finding (a
// point is taken only after a verify with none).
func (a *journalAudit) state() pointState {
	st := pointState{Records: a.records, Agents: slices.Clone(a.agents), Principals: a.principals.state()}
	for _, name := range a.ctrlOrder {
		st.Controllers = append(st.Controllers, pointController{Name: name, Dispatch: a.dispatchKey[name]})
	}
	for _, res := range a.held() {
		st.Reserves = append(st.Reserves, pointReserve{Reserve: res.rec, Seq: res.seq, Detail: res.detail, RedeliveredBy: res.redeliveredBy})
	}
	st.Chain = a.chain.state()
	l := a.ledger
	st.Ledger = pointLedger{Settled: l.settled, Max: l.max}
	for n, seq := range l.claimed {
		if n > l.settled {
			st.Ledger.Claimed = append(st.Ledger.Claimed, pointClaim{N: n, Record: seq})
		}
	}
	sort.Slice(st.Ledger.Claimed, func(i, j int) bool { return st.Ledger.Claimed[i].N < st.Ledger.Claimed[j].N })
	for _, name := range sortedKeys(l.purses) {
		st.Purses = append(st.Purses, l.purses[name].state(name))
	}
	keys := make([]agentKey, 0, len(a.asks.signed))
	for k := range a.asks.signed {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].controller != keys[j].controller {
			return keys[i].controller < keys[j].controller
		}
		return keys[i].agent < keys[j].agent
	})
	for _, k := range keys {
		st.Limits = append(st.Limits, a.asks.signed[k])
	}
	for _, k := range a.asks.byID {
		st.Asks = append(st.Asks, pointAsk{ID: k.id, Attempt: k.attempt, Seq: k.seq, Decided: k.decided, Verdict: string(k.verdict), AnsweredBy: k.answeredBy, Ended: k.ended})
	}
	sort.Slice(st.Asks, func(i, j int) bool { return st.Asks[i].Seq < st.Asks[j].Seq })
	return st
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (ch *receiptChain) state() pointChain {
	pc := pointChain{Linked: ch.linked, Head: ch.head, Recent: ch.recent, RecentFirst: ch.recentFirst,
		Checkpoints: uint64(ch.checkpoints), Covered: ch.covered}
	if ch.covering != nil {
		pc.CoveringAt = ch.covering.At
		pc.CoverHead, _ = hex.DecodeString(ch.covering.Head)
	}
	for _, c := range ch.pending {
		pc.Pending = append(pc.Pending, pointReceipt{Signed: c.signed, Record: uint64(c.order)})
	}
	sort.Slice(pc.Pending, func(i, j int) bool { return pc.Pending[i].Record < pc.Pending[j].Record })
	for _, e := range ch.early {
		pc.Early = append(pc.Early, pointCheckpoint{Signed: e.cp.signed, Record: uint64(e.cp.order)})
	}
	return pc
}

func (p *purseBook) state(name string) pointPurse {
	pp := pointPurse{Controller: name, Funded: p.funded, Charged: p.charged, Receipts: uint64(p.receipts),
		Receipted: p.receipted, Balance: p.balance, Folded: p.folded}
	evs := slices.Clone(p.events)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].ledger < evs[j].ledger })
	for _, ev := range evs {
		pp.Events = append(pp.Events, pointEvent{Ledger: ev.ledger, Delta: ev.delta, Kind: int(ev.kind)})
	}
	cks := slices.Clone(p.checks)
	sort.SliceStable(cks, func(i, j int) bool { return cks[i].ledger < cks[j].ledger })
	for _, ck := range cks {
		pp.Checks = append(pp.Checks, pointCheck{Ledger: ck.ledger, Balance: ck.balance, Seq: ck.seq, Record: ck.record})
	}
	return pp
}

// restore is the journalAudit a point's state carries, for the operator
// key pub. Everything signed in it (the receipts ahead of a gap, the
// checkpoints, the agents' limits) is verified again, and what the
// audit's steps take for granted is checked: a state that does not hold
// together is refused, whoever signed it.
func restore(pub *wire.HybridPublicKey, st pointState) (*journalAudit, error) {
	a := newJournalAudit(pub)
	a.records = st.Records
	a.agents = st.Agents
	pc, err := restorePrincipals(st.Principals)
	if err != nil {
		return nil, err
	}
	a.principals = pc
	for _, c := range st.Controllers {
		if err := a.pinDispatch(c.Name, c.Dispatch, "controller "+c.Name); err != nil {
			return nil, err
		}
	}
	for _, r := range st.Reserves {
		if a.reserves[r.Reserve.Attempt] != nil || a.dispatch[r.Reserve.Controller] == nil || r.Seq == 0 || r.Seq > st.Records {
			return nil, fmt.Errorf("reservation of attempt %s does not hold together", r.Reserve.Attempt)
		}
		a.reserves[r.Reserve.Attempt] = &auditReserve{rec: r.Reserve, seq: r.Seq, detail: r.Detail, redeliveredBy: r.RedeliveredBy}
	}
	if err := a.restoreChain(st.Chain); err != nil {
		return nil, err
	}
	if err := a.restoreLedger(st.Ledger, st.Purses); err != nil {
		return nil, err
	}
	for _, b := range st.Limits {
		if err := a.AgentLimits(recordAt(st.Records), &hostlog.AgentLimits{Limits: b}); err != nil {
			return nil, err
		}
	}
	for _, k := range st.Asks {
		if a.asks.byID[k.ID] != nil || a.asks.byAttempt[k.Attempt] != nil || (k.Decided && k.Ended) {
			return nil, fmt.Errorf("ask %s does not hold together", k.ID)
		}
		ak := &auditAsk{id: k.ID, attempt: k.Attempt, seq: k.Seq, decided: k.Decided, verdict: msg.Verdict(k.Verdict), answeredBy: k.AnsweredBy, ended: k.Ended}
		a.asks.byID[k.ID], a.asks.byAttempt[k.Attempt] = ak, ak
	}
	return a, nil
}

func (a *journalAudit) restoreChain(pc pointChain) error {
	ch := a.chain
	n := uint64(len(pc.Recent))
	switch {
	case len(pc.Head) != 32 || n > recentWindow || pc.Covered > pc.Linked || pc.Checkpoints > 1<<40:
		return fmt.Errorf("its receipt chain does not hold together")
	case pc.Linked == 0 && (n != 0 || pc.RecentFirst != 1 || !bytes.Equal(pc.Head, make([]byte, 32))):
		return fmt.Errorf("its receipt chain does not hold together")
	case pc.Linked > 0 && (n == 0 || pc.RecentFirst+n-1 != pc.Linked || !bytes.Equal(pc.Recent[n-1], pc.Head)):
		return fmt.Errorf("its receipt chain does not hold together")
	}
	ch.linked, ch.head, ch.recent, ch.recentFirst, ch.checkpoints, ch.covered = pc.Linked, pc.Head, pc.Recent, pc.RecentFirst, int(pc.Checkpoints), pc.Covered
	if pc.Covered > 0 {
		if len(pc.CoverHead) != 32 || pc.Covered >= pc.RecentFirst && !bytes.Equal(pc.CoverHead, pc.Recent[pc.Covered-pc.RecentFirst]) {
			return fmt.Errorf("its checkpoint coverage does not hold together")
		}
		ch.covering = &CheckpointView{Seq: pc.Covered, Head: hex.EncodeToString(pc.CoverHead), At: pc.CoveringAt}
	} else if pc.CoverHead != nil || pc.CoveringAt != 0 {
		return fmt.Errorf("its checkpoint coverage does not hold together")
	}
	for _, p := range pc.Pending {
		rc, err := msg.VerifyReceipt(p.Signed, a.hostRing)
		if err != nil || rc.Seq <= ch.linked+1 || p.Record == 0 {
			return fmt.Errorf("a receipt ahead of the chain's gap does not hold: %v", err)
		}
		if _, dup := ch.pending[rc.Seq]; dup {
			return fmt.Errorf("receipt %d is ahead of the chain's gap twice", rc.Seq)
		}
		ch.pending[rc.Seq] = chainReceipt{signed: p.Signed, r: rc, where: recordName(p.Record), order: int(p.Record)}
	}
	for _, e := range pc.Early {
		c, err := msg.VerifyCheckpoint(e.Signed, a.pub)
		if err != nil || c.Seq <= ch.linked && c.Seq != 0 {
			return fmt.Errorf("an early checkpoint does not hold: %v", err)
		}
		cp := chainCheckpoint{signed: e.Signed, where: recordName(e.Record), order: int(e.Record)}
		ch.early = append(ch.early, earlyCheckpoint{cp: cp, c: c, where: cp.where})
	}
	return nil
}

func (a *journalAudit) restoreLedger(pl pointLedger, purses []pointPurse) error {
	l := a.ledger
	if pl.Settled > pl.Max || uint64(len(pl.Claimed)) > 2*ledgerWindow {
		return fmt.Errorf("its ledger numbers do not hold together")
	}
	l.settled, l.max = pl.Settled, pl.Max
	last := pl.Settled
	for _, c := range pl.Claimed {
		if c.N <= last || c.N > pl.Max || c.Record == 0 {
			return fmt.Errorf("its ledger numbers do not hold together")
		}
		l.claimed[c.N], last = c.Record, c.N
	}
	prev := ""
	for i, pp := range purses {
		if i > 0 && pp.Controller <= prev || pp.Folded > l.settled || pp.Receipted > pp.Charged {
			return fmt.Errorf("the purse of %s does not hold together", pp.Controller)
		}
		prev = pp.Controller
		p := &purseBook{funded: pp.Funded, charged: pp.Charged, receipts: int(pp.Receipts), receipted: pp.Receipted, balance: pp.Balance, folded: pp.Folded}
		for _, ev := range pp.Events {
			if ev.Ledger <= pp.Folded || ev.Kind < int(eventFund) || ev.Kind > int(eventRelease) {
				return fmt.Errorf("the purse of %s does not hold together", pp.Controller)
			}
			p.events = append(p.events, purseEvent{ledger: ev.Ledger, delta: ev.Delta, kind: purseEventKind(ev.Kind)})
		}
		for _, ck := range pp.Checks {
			if ck.Ledger <= pp.Folded {
				return fmt.Errorf("the purse of %s does not hold together", pp.Controller)
			}
			p.checks = append(p.checks, balanceCheck{ledger: ck.Ledger, balance: ck.Balance, seq: ck.Seq, record: ck.Record, controller: pp.Controller})
		}
		l.purses[pp.Controller] = p
	}
	return nil
}

// recordAt is a record of seq only, to name it in a fault.
func recordAt(seq uint64) journal.Record { return journal.Record{Seq: seq} }
