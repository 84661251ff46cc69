package hosttest

import (
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
)

// The host journal as a test reads it, or forges it as one with the
// store's account could: records written as they are, not through the
// store's checks.

// Kinds counts the records of each kind in the host journal of store,
// read-only (the host may be running).
func Kinds(t testing.TB, store string) map[string]int {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	n := map[string]int{}
	if err := j.Iterate(1, func(r journal.Record) error { n[r.Kind]++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Append writes one record of kind with body to the host journal of the
// (stopped) store whose operator key is pub, and returns its sequence
// number.
func Append(t testing.TB, store string, pub *wire.HybridPublicKey, kind string, body any) uint64 {
	t.Helper()
	j, err := journal.Open(filepath.Join(store, hostlog.JournalDir), hostlog.Options(pub))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	seq, err := j.Append(kind, body)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// NextLedger is the ledger number the next balance change of the host
// journal of store takes: one above the highest any record carries.
func NextLedger(t testing.TB, store string) uint64 {
	t.Helper()
	j, _, err := hostlog.OpenReadOnly(store)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var top uint64
	err = j.Iterate(1, func(r journal.Record) error {
		rec, err := hostlog.Decode(r)
		if err != nil || rec == nil {
			return err
		}
		var n uint64
		switch b := rec.Body.(type) {
		case *hostlog.PurseFund:
			n = b.Ledger
		case *hostlog.Reserve:
			n = b.Ledger
		case *hostlog.ReserveV2:
			n = b.Ledger
		case *hostlog.NotSent:
			n = b.Ledger
		case *hostlog.NotSentV2:
			n = b.Ledger
		case *hostlog.Outcome:
			n = b.Ledger
		case *hostlog.OutcomeV2:
			n = b.Ledger
		case *hostlog.Refused:
			n = b.Ledger
		case *hostlog.Resolve:
			n = b.Ledger
		}
		top = max(top, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return top + 1
}
