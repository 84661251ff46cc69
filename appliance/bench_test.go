package appliance

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stewardrt/steward/oracleops"
)

// The benchmarks run an in-process appliance with its default journal
// (64 MiB preallocated segments, fdatasync per group commit) in a
// temporary directory on the real disk, and call it over its Unix socket
// with net/http, the way the host does. They report calls/s.

// benchApp caps each operation at 16 concurrent invocations, the most
// clients a benchmark runs, so that no call is refused as busy (calc's own
// cap is 8, and with 16 clients more than 8 can be inside it at once).
func benchApp(b *testing.B) *app {
	return startApp(b, Config{JournalSegmentSize: -1, Capacity: 16})
}

func benchCall(b *testing.B, a *app, id string) {
	r, err := oracleops.BuildInvoke(DefaultPrefix, oracleops.InvokeBody{
		Arguments: json.RawMessage(`{"expression":"3 * 687 / 365.25"}`), ConversationID: "bench", OperationID: "calc.evaluate", RequestID: id,
	})
	if err != nil {
		b.Fatal(err)
	}
	req, err := r.HTTP(context.Background(), "http://appliance")
	if err != nil {
		b.Fatal(err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkInvokeFresh: every call has a new requestId, so every call
// runs calc.evaluate and journals its answer (append + fdatasync) before
// answering. With 16 clients, answers are group-committed.
func BenchmarkInvokeFresh(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(clients), func(b *testing.B) {
			a := benchApp(b)
			var n atomic.Int64
			if clients == 1 {
				for b.Loop() {
					benchCall(b, a, "fresh-"+strconv.FormatInt(n.Add(1), 10))
				}
			} else {
				b.SetParallelism((clients + 1) / 2) // GOMAXPROCS is 2 here
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						benchCall(b, a, "fresh-"+strconv.FormatInt(n.Add(1), 10))
					}
				})
			}
			reportRate(b)
		})
	}
}

// BenchmarkInvokeReplay: every call repeats one recorded requestId and
// body, so the appliance answers from its index: no operation, no
// journal.
func BenchmarkInvokeReplay(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run("clients="+strconv.Itoa(clients), func(b *testing.B) {
			a := benchApp(b)
			benchCall(b, a, "replayed")
			recs := a.records()
			if clients == 1 {
				for b.Loop() {
					benchCall(b, a, "replayed")
				}
			} else {
				b.SetParallelism((clients + 1) / 2)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						benchCall(b, a, "replayed")
					}
				})
			}
			reportRate(b)
			if a.records() != recs {
				b.Fatal("a replay was journaled")
			}
		})
	}
}

// BenchmarkDescribe: GET /v1/operations/calc.evaluate, one client.
func BenchmarkDescribe(b *testing.B) {
	a := benchApp(b)
	r, _ := oracleops.BuildDescribe(DefaultPrefix, "calc.evaluate")
	for b.Loop() {
		req, _ := r.HTTP(context.Background(), "http://appliance")
		resp, err := a.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	reportRate(b)
}
