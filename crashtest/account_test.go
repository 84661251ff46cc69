package crashtest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stewardrt/steward/wire/msg"
)

// report is the harness's account of one run. The first group counts the
// requestIds by the last answer their client heard during the chaos
// phase; Final* by the answer after the uncertain attempts were resolved
// and every unfinished requestId was retried once on a calm stack.
type report struct {
	Duration string         `json:"duration"`
	Clients  int            `json:"clients"`
	Kills    map[string]int `json:"kills"`
	Issued   int            `json:"issued"`
	Tries    int            `json:"tries"`    // calls made, retries included
	Answers  map[string]int `json:"answers"`  // every try's answer, by outcome and refusal code
	Retried  int            `json:"retried"`  // requestIds tried more than once
	Definite int            `json:"definite"` // during the chaos phase
	Refused  int            `json:"refused"`
	NotSent  int            `json:"notSent"`
	// Uncertain and Errored: an uncertain outcome, or no tool result at
	// all (the session broke), as the last answer during the chaos phase.
	Uncertain int `json:"uncertain"`
	Errored   int `json:"errored"`
	// Resolved is how many attempts `attempts resolve` settled at the
	// end, Redelivered how many of them the host's operator redelivered
	// first (the host held them uncertain); HostUncertain how many it
	// could not, because the host still holds them uncertain (their
	// reservations stay held).
	Resolved      int `json:"resolved"`
	Redelivered   int `json:"redelivered"`
	HostUncertain int `json:"hostUncertain"`
	FinalDefinite int `json:"finalDefinite"`
	// Unfinished: no definite answer even after the last retry, yet the
	// requestId is in some journal (named in UnfinishedIDs).
	Unfinished    int      `json:"unfinished"`
	UnfinishedIDs []string `json:"unfinishedIds,omitempty"`
	// Lost: no definite answer and nowhere in any journal, or answered
	// definite to the agent with no trace of the application's answer or
	// of a receipt.
	Lost    []string `json:"lost"`
	Twice   []string `json:"deliveredTwice"` // the application answered one requestId twice
	Charged []string `json:"chargedTwice"`   // two charged receipts for one requestId
	// The controller journal: attempts begun for the harness's requestIds.
	AttemptsBegun int            `json:"attemptsBegun"`
	AttemptEnds   map[string]int `json:"attemptEnds"` // by outcome or resolution; "open" without
	// The host: receipts and the purse.
	Receipts        int    `json:"receipts"`
	ReceiptCharges  uint64 `json:"receiptCharges"`
	Funded          uint64 `json:"funded"`
	Balance         uint64 `json:"balance"`
	PurseCharged    uint64 `json:"purseCharged"`    // purse show: receipts plus held reservations
	VerifiedCharged uint64 `json:"verifiedCharged"` // receipts verify's recomputed purse
	Held            uint64 `json:"held"`            // PurseCharged - ReceiptCharges
	// HeldReservations: receipts verify's findings of a reservation still
	// held; HostFindings: every other finding (each fails the run).
	HeldReservations int      `json:"heldReservations"`
	HostFindings     []string `json:"hostFindings,omitempty"`
	ExportError      string   `json:"exportError,omitempty"` // receipts export's refusal, reported only
	// The application: requestIds it answered, and those of them with no
	// receipt (it ran them, the host never recorded its answer: each is
	// one of the held reservations).
	AppAnswered    int      `json:"appAnswered"`
	AppUnreceipted int      `json:"appAnsweredUnreceipted"`
	Arithmetic     []string `json:"arithmetic,omitempty"` // purse sums that do not add up
}

// maxListed is how many unfinished requestIds the report names: they are
// expected (the host holds them uncertain), and a long run has hundreds.
const maxListed = 20

// account compares what the clients heard with the three journals.
func account(book *callBook, js journals, hostUncertain int) report {
	r := report{Issued: len(book.calls), Answers: map[string]int{}, AttemptEnds: map[string]int{},
		AppAnswered: len(js.answers), HostUncertain: hostUncertain}
	receiptsOf := map[string]int{}
	for _, rc := range js.receipts {
		r.Receipts++
		r.ReceiptCharges += rc.Charge
		if rc.Kind == msg.KindInvoke && rc.Charge > 0 {
			receiptsOf[js.attemptRequest[rc.Attempt]]++
		}
	}
	for a := range js.attemptRequest {
		r.AttemptsBegun++
		end, ok := js.attemptEnd[a]
		if !ok {
			end = "open"
		}
		r.AttemptEnds[string(end)]++
	}
	for id, k := range book.calls {
		r.Tries += k.tries
		for o, n := range k.heard {
			r.Answers[o] += n
		}
		if k.tries > 1 {
			r.Retried++
		}
		switch k.chaosLast {
		case outDefinite:
			r.Definite++
		case outRefused:
			r.Refused++
		case outNotSent:
			r.NotSent++
		case outUncertain:
			r.Uncertain++
		default:
			r.Errored++
		}
		traced := js.begins[id] > 0 || js.answers[id] > 0 || receiptsOf[id] > 0
		switch {
		case k.last == outDefinite:
			r.FinalDefinite++
			if k.status/100 == 2 && (js.answers[id] == 0 || receiptsOf[id] == 0) {
				r.Lost = append(r.Lost, id+" (answered definite, no application answer or receipt)")
			}
		case traced:
			r.Unfinished++
			r.UnfinishedIDs = append(r.UnfinishedIDs, id)
		default:
			r.Lost = append(r.Lost, id+" (never definite, in no journal)")
		}
		if js.answers[id] > 0 && receiptsOf[id] == 0 {
			r.AppUnreceipted++
		}
		if js.answers[id] > 1 {
			r.Twice = append(r.Twice, id)
		}
		if receiptsOf[id] > 1 {
			r.Charged = append(r.Charged, id)
		}
	}
	for id, n := range js.answers {
		if _, ok := book.calls[id]; !ok {
			r.Lost = append(r.Lost, fmt.Sprintf("%s (the application answered %d times a requestId no client issued)", id, n))
		}
	}
	sort.Strings(r.Lost)
	sort.Strings(r.Twice)
	sort.Strings(r.Charged)
	sort.Strings(r.UnfinishedIDs)
	if len(r.UnfinishedIDs) > maxListed {
		r.UnfinishedIDs = append(r.UnfinishedIDs[:maxListed], fmt.Sprintf("and %d more", len(r.UnfinishedIDs)-maxListed))
	}
	r.purse(js)
	return r
}

// heldFinding is how receipts verify names a reservation still held: an
// attempt the host holds uncertain, charged without a receipt.
const heldFinding = "charged without a receipt, still held"

// purse checks funded = balance + charged (purse show), that receipts
// verify recomputes the same purse, that charged = the receipts' charges
// + the held reservations, each at the grant's price, and that every
// finding of receipts verify is a held reservation.
func (r *report) purse(js journals) {
	p := js.purse
	r.Funded, r.Balance, r.PurseCharged = p.Funded, p.Balance, p.Charged
	r.ExportError = js.exportError
	for _, f := range js.verify.Findings {
		if strings.Contains(f, heldFinding) {
			r.HeldReservations++
		} else {
			r.HostFindings = append(r.HostFindings, f)
		}
	}
	for _, v := range js.verify.Purses {
		if v.Controller == "dev" {
			r.VerifiedCharged = v.Charged
		}
	}
	if r.Receipts != js.verify.Receipts {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("the host journal holds %d receipts, receipts verify counts %d", r.Receipts, js.verify.Receipts))
	}
	if p.Funded != p.Balance+p.Charged {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("funded %d != balance %d + charged %d", p.Funded, p.Balance, p.Charged))
	}
	if r.VerifiedCharged != p.Charged {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("receipts verify recomputes charged %d, purse show says %d", r.VerifiedCharged, p.Charged))
	}
	if r.ReceiptCharges > p.Charged {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("receipts charge %d, more than the purse's charged %d", r.ReceiptCharges, p.Charged))
	} else {
		r.Held = p.Charged - r.ReceiptCharges
	}
	if r.AppUnreceipted > r.HeldReservations {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("the application ran %d requestIds without a receipt, more than the %d reservations held", r.AppUnreceipted, r.HeldReservations))
	}
	if want := uint64(r.HeldReservations) * price; r.Held != want {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("held %d, not the price of the %d reservations receipts verify reports held (%d)", r.Held, r.HeldReservations, want))
	}
}

// failures are the findings that fail the run.
func (r *report) failures() []string {
	var f []string
	if r.Issued > 0 && r.FinalDefinite == 0 {
		// A stack that answers nothing loses nothing: it proves nothing.
		f = append(f, fmt.Sprintf("no call of %d was ever answered definite", r.Issued))
	}
	for _, id := range r.Lost {
		f = append(f, "lost: "+id)
	}
	for _, id := range r.Twice {
		f = append(f, "delivered twice: "+id)
	}
	for _, id := range r.Charged {
		f = append(f, "charged twice: "+id)
	}
	for _, h := range r.HostFindings {
		f = append(f, "receipts verify: "+h)
	}
	for _, a := range r.Arithmetic {
		f = append(f, "purse: "+a)
	}
	return f
}
