package appliance

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/journal/index"
	"github.com/stewardrt/steward/oracleops"
)

// The generator of journals: records of every kind the replay's decoder
// table (recordKinds) knows, written by a running appliance's own code.
// An answer is an invocation the operation really runs (execute), its
// answer journaled by the ledger (record), as handleInvoke does, only
// without HTTP, so that a million are written in a minute.

// generators writes one record (or a few) of each kind. The bind record
// is the journal's first, written by the journal itself.
var generators = map[string]func(t testing.TB, s *Server, i int){
	kindBind: func(testing.TB, *Server, int) {},
	kindRebind: func(t testing.TB, s *Server, i int) {
		// Away and back: the journal stays bound to journalConfig, so
		// that the appliance opens it.
		for _, c := range [][]byte{[]byte(fmt.Sprintf(`{"rebound":%d}`, i)), journalConfig} {
			if _, err := s.journal.Rebind(c); err != nil {
				t.Fatal(err)
			}
		}
	},
	kindAnswer: func(t testing.TB, s *Server, i int) { genCall(t, s, i) },
}

// callBody is the invocation of call number i: a mix of the operations
// and of their refusals (404, 403, 422), each with its own request id.
func callBody(i int) oracleops.InvokeBody {
	var op, args string
	switch i % 6 {
	case 0, 1:
		op, args = "calc.evaluate", fmt.Sprintf(`{"expression":"%d * 687 / 365.25"}`, i)
	case 2:
		op, args = "units.convert", fmt.Sprintf(`{"from":"mi","to":"km","value":"%d"}`, i)
	case 3:
		op, args = "text.sha256", fmt.Sprintf(`{"text":"call %d"}`, i)
	case 4:
		op, args = "calc.evaluate", fmt.Sprintf(`{"expression":"%d / 0"}`, i)
	default:
		op, args = []string{"no.such", "units.currency", "calc.evaluate"}[i/6%3], `{"amount":"1"}`
	}
	return oracleops.InvokeBody{Arguments: json.RawMessage(args), ConversationID: "gen", OperationID: op,
		RequestID: fmt.Sprintf("gen-%08d", i)}
}

// genCall runs call i through s and journals its answer.
func genCall(t testing.TB, s *Server, i int) {
	inv := callBody(i)
	canon, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	status, response, journaled := s.execute(inv)
	if !journaled {
		t.Fatalf("call %d: %d %s was not journaled", i, status, response)
	}
	if err := s.ledger.record(inv.RequestID, sha256.Sum256(canon), status, response); err != nil {
		t.Fatal(err)
	}
}

// genCalls records calls from to from+n-1 with workers at once (their
// appends group-committed).
func genCalls(t testing.TB, s *Server, from, n, workers int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				genCall(t, s, i)
			}
		})
	}
	for i := from; i < from+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// genAllKinds writes calls and every other kind of record in turn: the
// journal then holds every kind recordKinds knows.
func genAllKinds(t testing.TB, s *Server, calls int) {
	kinds := make([]string, 0, len(generators))
	for k := range generators {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i := range calls {
		if i%7 == 3 {
			for _, k := range kinds {
				if k != kindAnswer {
					generators[k](t, s, i)
				}
			}
		}
		genCall(t, s, i)
	}
}

// fullReplay is what a replay of the whole journal of state gives, in
// memory (no snapshot, no index): every answer's entry in all.
func fullReplay(t testing.TB, state string) *replayState {
	t.Helper()
	st := newReplayState(nil, journalDir(state), nil)
	j, err := journal.Open(journalDir(state), journal.Options{ReadOnly: true, OnRecord: st.Apply, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	return st
}

// sameAsFull checks a state and its index against a full replay of the
// journal of state: the same counters and origin, and exactly the full
// replay's entries in the index.
func sameAsFull(t testing.TB, state string, got *replayState, x *index.Index) {
	t.Helper()
	full := fullReplay(t, state)
	if got.Seq != full.Seq || got.Answers != full.Answers || !bytes.Equal(got.Origin, full.Origin) {
		t.Fatalf("state: seq %d, %d answers, origin %x; a full replay: seq %d, %d answers, origin %x",
			got.Seq, got.Answers, got.Origin, full.Seq, full.Answers, full.Origin)
	}
	sameEntries(t, full.all, x)
}

// sameEntries checks that x holds exactly the entries of all.
func sameEntries(t testing.TB, all map[string]entry, x *index.Index) {
	t.Helper()
	n := 0
	err := x.Range(answersBucket, nil, func(k, v []byte) error {
		n++
		want, ok := all[string(k)]
		if !ok {
			return fmt.Errorf("the index holds requestId %q, which a full replay does not", k)
		}
		if !bytes.Equal(v, encodeEntry(want)) {
			return fmt.Errorf("the index's entry of %q is %x, a full replay's %x", k, v, encodeEntry(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(all) {
		t.Fatalf("the index holds %d answers, a full replay %d", n, len(all))
	}
}
