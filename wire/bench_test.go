package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
)

// kib is the request and reply body of the round-trip benchmarks.
var kib = bytes.Repeat([]byte("steward!"), 128)

// BenchmarkSignedRoundTrip: one signed 1 KiB request and reply over a
// socketpair: encode, sign, write, read, verify, decode, both ways.
func BenchmarkSignedRoundTrip(b *testing.B) {
	p := newPair(b)
	var frameBytes int
	b.ReportAllocs()
	for b.Loop() {
		if err := p.client.Send("req", "1", kib); err != nil {
			b.Fatal(err)
		}
		req, err := p.server.Recv()
		if err != nil {
			b.Fatal(err)
		}
		var body []byte
		if err := req.Decode(&body); err != nil {
			b.Fatal(err)
		}
		if err := p.server.Send("rep", req.ID, body); err != nil {
			b.Fatal(err)
		}
		rep, err := p.client.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.Decode(&body); err != nil || len(body) != len(kib) {
			b.Fatal(err)
		}
	}
	frameBytes = len(p.tap.last())
	b.ReportMetric(float64(frameBytes), "frame-bytes")
}

// BenchmarkRawRoundTrip: the same number of bytes as one signed frame,
// written and read unsigned and undecoded over a socketpair, both ways.
func BenchmarkRawRoundTrip(b *testing.B) {
	// Size one signed request frame exactly as BenchmarkSignedRoundTrip sends it.
	p := newPair(b)
	p.client.Send("req", "1", kib)
	frame := p.tap.last()
	msg := frame[4:]

	a, c := socketPair(b)
	ar, cr := bufio.NewReaderSize(a, readBufferSize), bufio.NewReaderSize(c, readBufferSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteFrame(a, msg, MaxRequestFrame); err != nil {
			b.Fatal(err)
		}
		got, err := ReadFrame(cr, MaxRequestFrame)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteFrame(c, got, MaxReplyFrame); err != nil {
			b.Fatal(err)
		}
		if _, err := ReadFrame(ar, MaxReplyFrame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(frame)), "frame-bytes")
}

// BenchmarkMuxCall: one Client.Call answered by Serve, through the reader
// and handler goroutines, 1 KiB each way.
func BenchmarkMuxCall(b *testing.B) {
	p := newPair(b)
	go Serve(context.Background(), p.server, HandlerFunc(func(ctx context.Context, req *Envelope) (string, any) {
		return "rep", req.Body
	}))
	cl := NewClient(p.client)
	defer cl.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Call(context.Background(), "req", kib); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519Sign(b *testing.B) {
	k := mustKey(b)
	for b.Loop() {
		ed25519.Sign(k.priv, kib)
	}
}

func BenchmarkEd25519Verify(b *testing.B) {
	k := mustKey(b)
	sig := ed25519.Sign(k.priv, kib)
	for b.Loop() {
		if !ed25519.Verify(k.pub.key, kib, sig) {
			b.Fatal("bad")
		}
	}
}

func BenchmarkSign1(b *testing.B) {
	k := mustKey(b)
	b.ReportAllocs()
	for b.Loop() {
		Sign1(k, kib)
	}
}

func BenchmarkVerify1(b *testing.B) {
	k := mustKey(b)
	keys := NewKeyring(k.Public())
	msg, _ := Sign1(k, kib)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Verify1(msg, keys); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignHybrid(b *testing.B) {
	h, _ := GenerateHybridKey()
	for b.Loop() {
		SignHybrid(h, kib)
	}
}

func BenchmarkVerifyHybrid(b *testing.B) {
	h, _ := GenerateHybridKey()
	msg, _ := SignHybrid(h, kib)
	for b.Loop() {
		if _, err := VerifyHybrid(msg, h.Public()); err != nil {
			b.Fatal(err)
		}
	}
}
