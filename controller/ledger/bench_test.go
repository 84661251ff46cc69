package ledger

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire/msg"
)

// Begin's dedup lookup of a requestId answered before, in memory and in
// the history index, in one run (the second reports the ratio):
//
//	go test -run '^$' -bench BeginLookup ./controller/ledger/
//	STEWARD_BENCH_INDEX_ENTRIES=1000000 go test -run '^$' -bench BeginLookup ./controller/ledger/
var lookupNs = map[string]float64{}

// benchEntries is how many requestIds the ledger knows (memory) or its
// index holds.
func benchEntries(b *testing.B) int {
	if s := os.Getenv("STEWARD_BENCH_INDEX_ENTRIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("STEWARD_BENCH_INDEX_ENTRIES=%q", s)
		}
		return n
	}
	return 100_000
}

// answered is the entry of requestId i, answered at record 2i+1.
func answered(i int) (reqKey, *reqEntry) {
	id := "req-" + strconv.Itoa(i)
	q := &reqEntry{attempt: fmt.Sprintf("%032x", i), sha: sha256.Sum256([]byte("x")), path: "/v1", route: "r-appliance",
		state: msg.StateDefinite, endSeq: uint64(2*i + 1), answer: journal.Place{Seq: uint64(2*i + 1), Segment: 1, Offset: int64(i) * 4000}}
	return reqKey{"agent1", "appliance", id}, q
}

func BenchmarkBeginLookup(b *testing.B) {
	n := benchEntries(b)
	for _, where := range []string{"memory", "index"} {
		b.Run(fmt.Sprintf("%s/entries=%d", where, n), func(b *testing.B) {
			l := New()
			if where == "index" {
				x := newIndex(b)
				l = NewIndexed(x)
				for i := range n {
					k, q := answered(i)
					if err := l.putReq(k, q); err != nil {
						b.Fatal(err)
					}
				}
				if err := x.Sync(); err != nil {
					b.Fatal(err)
				}
			} else {
				for i := range n {
					k, q := answered(i)
					l.byReq[k] = q
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			bg := paidOn("new", "", "x", 1)
			b.ResetTimer()
			for range b.N {
				bg.RequestID = "req-" + strconv.Itoa(r.IntN(n))
				if p, ok := l.Begin(bg); ok || p.Err != nil || p.State != msg.StateDefinite {
					b.Fatalf("%s: %+v %v", bg.RequestID, p, ok)
				}
			}
			b.StopTimer()
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			lookupNs[where] = ns
			if m := lookupNs["memory"]; where == "index" && m > 0 {
				b.ReportMetric(ns/m, "x-memory")
			}
		})
	}
}
