package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
)

// echo is the request and reply body of the mux tests.
type echo struct {
	Call int    `cbor:"call"`
	Text string `cbor:"text"`
}

func TestMuxManyConcurrentCalls(t *testing.T) {
	p := newPair(t)
	served := make(chan error, 1)
	go func() {
		served <- Serve(context.Background(), p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) {
			var b echo
			if err := req.Decode(&b); err != nil {
				return "error", err.Error()
			}
			// Replies leave in another order than requests came: the
			// handler for call n waits for nothing, but the goroutines race.
			return "echo-reply", echo{Call: b.Call, Text: b.Text + "!"}
		}))
	}()
	cl := NewClient(p.client)
	const calls = 300
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			text := fmt.Sprintf("call %d", i)
			r, err := cl.Call(context.Background(), "echo", echo{Call: i, Text: text})
			if err != nil {
				errs <- err
				return
			}
			var b echo
			if err := r.Decode(&b); err != nil || b.Call != i || b.Text != text+"!" || r.T != "echo-reply" {
				errs <- fmt.Errorf("call %d got %+v (%q) %v", i, b, r.T, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cl.Close()
	if err := <-served; err == nil {
		t.Fatal("Serve returned nil after the client closed")
	}
}

func TestServeBoundsInFlight(t *testing.T) {
	p := newPair(t)
	var running, peak atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, MaxInFlight+16)
	go Serve(context.Background(), p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) {
		n := running.Add(1)
		for {
			m := peak.Load()
			if n <= m || peak.CompareAndSwap(m, n) {
				break
			}
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return "ok", nil
	}))
	cl := NewClient(p.client)
	defer cl.Close()
	const calls = MaxInFlight + 16
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range calls {
		wg.Go(func() {
			if _, err := cl.Call(context.Background(), "block", nil); err != nil {
				failed.Add(1)
			}
		})
	}
	for range MaxInFlight {
		<-started // the first MaxInFlight all run at once
	}
	if n := running.Load(); n != MaxInFlight {
		t.Fatalf("%d handlers running, want %d", n, MaxInFlight)
	}
	close(release) // the other 16 waited, and now run too: none dropped
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
	if peak.Load() != MaxInFlight {
		t.Fatalf("peak of %d handlers at once, bound is %d", peak.Load(), MaxInFlight)
	}
}

func TestMuxChannelFailureFailsPendingCalls(t *testing.T) {
	p := newPair(t)
	got := make(chan struct{}, 8)
	// A server that reads requests and never answers, then dies.
	go func() {
		for range 8 {
			if _, err := p.server.Recv(); err != nil {
				return
			}
			got <- struct{}{}
		}
	}()
	cl := NewClient(p.client)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := cl.Call(context.Background(), "never", nil)
			errs <- err
		}()
	}
	for range 8 {
		<-got
	}
	p.serverRaw.Close()
	for range 8 {
		if err := <-errs; !errors.Is(err, io.EOF) {
			t.Fatalf("pending call: %v, want the channel's error (EOF)", err)
		}
	}
	if _, err := cl.Call(context.Background(), "after", nil); !errors.Is(err, io.EOF) {
		t.Fatalf("call after failure: %v", err)
	}
	if !errors.Is(cl.Err(), io.EOF) {
		t.Fatalf("Err: %v", cl.Err())
	}
}

func TestMuxCallCancelled(t *testing.T) {
	p := newPair(t)
	hold := make(chan struct{})
	go Serve(context.Background(), p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) {
		if req.T == "slow" {
			<-hold
		}
		return "done", req.T
	}))
	cl := NewClient(p.client)
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Call(ctx, "slow", nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	close(hold) // the late reply arrives and is discarded; the channel stays up
	r, err := cl.Call(context.Background(), "fast", nil)
	if err != nil {
		t.Fatalf("call after a cancelled one: %v", err)
	}
	var s string
	if err := r.Decode(&s); err != nil || s != "fast" {
		t.Fatalf("reply %q %v", s, err)
	}
}

func TestMuxUnsolicitedReplyFailsChannel(t *testing.T) {
	p := newPair(t)
	cl := NewClient(p.client)
	defer cl.Close()
	if err := p.server.Send("reply", "no-such-call", nil); err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	if err := cl.Err(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Err: %v, want ErrMalformed for a reply nobody asked for", err)
	}
}

func TestServeReturnsOnContext(t *testing.T) {
	p := newPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) { return "ok", nil }))
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v, want context.Canceled", err)
	}
	expectClosed(t, p.clientRaw)
}

func TestServeReplyTooLarge(t *testing.T) {
	p := newPair(t)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) {
			return "huge", make([]byte, MaxReplyFrame)
		}))
	}()
	cl := NewClient(p.client)
	defer cl.Close()
	if _, err := cl.Call(context.Background(), "q", nil); !errors.Is(err, io.EOF) {
		t.Fatalf("call whose reply cannot be sent: %v, want the channel closed", err)
	}
	if err := <-done; !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Serve: %v, want ErrFrameTooLarge", err)
	}
}
