package host_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/hosttest"
	"github.com/stewardrt/steward/internal/peertest"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// runDispatchers runs b.N calls spread over n goroutines and reports calls/s.
func runDispatchers(b *testing.B, n int, one func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := one(i); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
}

var benchRun atomic.Int64

// BenchmarkHostCall: admitted, charged invocations through the host (consent
// on the reverse channel, reserve and outcome journaled, receipt signed) to
// the application, from n concurrent dispatchers sharing one forward
// channel, as a controller does.
func BenchmarkHostCall(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("dispatchers=%d", n), func(b *testing.B) {
			w := hosttest.NewWorld(b, hosttest.Opts{Fund: 1 << 40, Price: 1, PerDay: 1 << 40})
			w.Serve(b)
			cl := w.Dial(b)
			run := benchRun.Add(1)
			runDispatchers(b, n, func(i int64) error {
				return benchInvoke(b, cl, fmt.Sprintf("b%d-%d", run, i), "")
			})
		})
	}
}

// benchInvoke dispatches one invocation of calc.evaluate as attempt, by
// agent ("" names none), and wants it answered 200.
func benchInvoke(b *testing.B, cl *wire.Client, attempt, agent string) error {
	d := peertest.InvokeDispatch(b, attempt, "calc.evaluate", `{"expression":"3 * 687 / 365.25"}`)
	d.Agent = agent
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env, err := cl.Call(ctx, msg.TypeDispatch, d)
	if err != nil {
		return err
	}
	var res msg.DispatchResult
	if err := env.Decode(&res); err != nil {
		return err
	}
	if res.Outcome != msg.StateDefinite || res.Status != 200 {
		return fmt.Errorf("%+v", res)
	}
	return nil
}

// BenchmarkDirectCall: the same invocation posted straight to the
// application's socket with net/http (keep-alive), no custody.
func BenchmarkDirectCall(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("dispatchers=%d", n), func(b *testing.B) {
			dir := peertest.ShortDir(b)
			app := peertest.StartApp(b, dir)
			hc := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", app.Sock)
				},
				MaxIdleConnsPerHost: 64,
			}}
			defer hc.CloseIdleConnections()
			runDispatchers(b, n, func(i int64) error {
				d := peertest.InvokeDispatch(b, fmt.Sprintf("d%d", i), "calc.evaluate", `{"expression":"3 * 687 / 365.25"}`)
				resp, err := hc.Post("http://app"+d.Path, "application/json", bytes.NewReader(d.Body))
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return err
			})
		})
	}
}
