package ledger

import "github.com/stewardrt/steward/journal"

// ReceiptsRead is what ReadReceipts found in a journal: the receipts it
// recorded (Recorded, by attempt), each attempt it began with its request
// hash (Begun), and, for those with an application requestId, which
// agent's requestId of which application it was (Requests): `receipts
// compare` finds two consents for one requestId by it.
type ReceiptsRead struct {
	Recorded map[string][]byte
	Begun    map[string][]byte
	Requests map[string]RequestName
}

// RequestName is an agent's requestId of an application, as a begin
// names it (Begin.Owner, Begin.Application, Begin.RequestID).
type RequestName struct{ Agent, Application, RequestID string }

// ReadReceipts reads j from its first record (see Receipts).
func ReadReceipts(j Records) (ReceiptsRead, error) {
	out := ReceiptsRead{Recorded: map[string][]byte{}, Begun: map[string][]byte{}, Requests: map[string]RequestName{}}
	keep := func(attempt string, receipt []byte) {
		if receipt != nil {
			out.Recorded[attempt] = receipt
		}
	}
	err := j.Iterate(0, func(r journal.Record) error {
		switch r.Kind {
		case KindBegin:
			var b Begin
			if err := Decode(r, &b); err != nil {
				return err
			}
			out.Begun[b.Attempt] = b.RequestSHA256
			if b.RequestID != "" {
				out.Requests[b.Attempt] = RequestName{b.Owner(), b.Application, b.RequestID}
			}
		case KindResult:
			var res Result
			if err := Decode(r, &res); err != nil {
				return err
			}
			keep(res.Attempt, res.Receipt)
		case KindResolve:
			var res Resolve
			if err := Decode(r, &res); err != nil {
				return err
			}
			keep(res.Attempt, res.Receipt)
		case KindResolveV2:
			var res ResolveV2
			if err := Decode(r, &res); err != nil {
				return err
			}
			keep(res.Attempt, res.Receipt)
		}
		return nil
	})
	return out, err
}
