package wire

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// Every decoder that reads bytes from another account is fuzzed here. The
// seed corpora live in testdata/fuzz/FuzzX/ and are checked (or, with
// WIRE_WRITE_CORPUS=1, rewritten) by TestFuzzCorpus.

// fuzzKey and fuzzHybrid are fixed keys, so that signed seeds stay valid.
var (
	fuzzKey    = newSigningKey(seedOf("steward wire fuzz key"))
	fuzzHybrid = func() *HybridSigningKey {
		s := [mldsa65.SeedSize]byte(seedOf("steward wire fuzz ML-DSA key"))
		return newHybridSigningKey(newSigningKey(seedOf("steward wire fuzz hybrid Ed25519 key")), &s)
	}()
)

func seedOf(label string) []byte {
	s := sha256.Sum256([]byte(label))
	return s[:]
}

// isOneOf reports whether err wraps one of the sentinels.
func isOneOf(err error, sentinels ...error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func FuzzReadFrame(f *testing.F) {
	const limit = 1024
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := ReadFrame(bufio.NewReader(bytes.NewReader(data)), limit)
		if len(data) < 4 {
			if err == nil {
				t.Fatal("a frame from fewer than 4 bytes")
			}
			return
		}
		n := binary.BigEndian.Uint32(data)
		switch {
		case n > limit:
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("prefix %d past the bound: %v", n, err)
			}
		case uint64(len(data)-4) < uint64(n):
			if err == nil {
				t.Fatal("a frame from a short body")
			}
		default:
			if err != nil || !bytes.Equal(msg, data[4:4+n]) {
				t.Fatalf("frame of %d: %v", n, err)
			}
		}
	})
}

func FuzzEnvelope(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			return
		}
		// What decodes re-encodes deterministically and decodes the same.
		b, err := Marshal(e)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		e2, err := decodeEnvelope(b)
		if err != nil {
			t.Fatalf("decode of re-encoding: %v", err)
		}
		if e.V != e2.V || e.T != e2.T || !bytes.Equal(e.Ch, e2.Ch) || e.Seq != e2.Seq || e.ID != e2.ID || e.At != e2.At {
			t.Fatalf("round trip changed the envelope: %+v %+v", e, e2)
		}
		var body any
		e.Decode(&body) // must not panic
	})
}

func FuzzVerify1(f *testing.F) {
	keys := NewKeyring(fuzzKey.Public())
	f.Fuzz(func(t *testing.T, data []byte) {
		payload, signer, err := Verify1(data, keys)
		if err != nil {
			if !isOneOf(err, ErrMalformed, ErrUnknownKID, ErrBadSignature) || payload != nil || signer != nil {
				t.Fatalf("refusal %v with payload %q", err, payload)
			}
			return
		}
		// Only the key holder can make a message that verifies, and then it
		// is exactly Sign1's encoding.
		if want, _ := Sign1(fuzzKey, payload); !bytes.Equal(want, data) {
			t.Fatalf("verified a message that Sign1 does not produce: % x", data)
		}
	})
}

func FuzzVerifyHybrid(f *testing.F) {
	pub := fuzzHybrid.Public()
	f.Fuzz(func(t *testing.T, data []byte) {
		payload, err := VerifyHybrid(data, pub)
		if err != nil {
			if !isOneOf(err, ErrMalformed, ErrUnknownKID, ErrBadSignature) || payload != nil {
				t.Fatalf("refusal %v with payload %q", err, payload)
			}
			return
		}
		if !bytes.Contains(data, payload) {
			t.Fatal("payload not taken from the message")
		}
	})
}

func FuzzParsePublicKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := ParsePublicKey(data); err == nil {
			q, err := ParsePublicKey(p.MarshalCOSEKey())
			if err != nil || !q.Equal(p) || q.KID() != p.KID() {
				t.Fatalf("re-parse: %v", err)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error not wrapping ErrMalformed: %v", err)
		}
		if h, err := ParseHybridPublicKey(data); err == nil {
			g, err := ParseHybridPublicKey(h.MarshalCOSEKey())
			if err != nil || !g.Equal(h) || g.KID() != h.KID() || g.MLDSAKID() != h.MLDSAKID() {
				t.Fatalf("hybrid re-parse: %v", err)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("hybrid: error not wrapping ErrMalformed: %v", err)
		}
	})
}

// fuzzSeeds are the seed corpora, by fuzz target.
func fuzzSeeds(t *testing.T) map[string][][]byte {
	sign := func(e Envelope) []byte {
		m, err := signEnvelope(fuzzKey, &e)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	env := func(e any) []byte {
		b, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	goodEnv := Envelope{V: 1, T: "dispatch", Ch: bytes.Repeat([]byte{7}, 32), Seq: 1, ID: "a1", At: 1700000000000, Body: env(map[string]any{"op": "x", "n": 1})}
	signed := sign(goodEnv)
	hello := sign(Envelope{V: 1, T: TypeHello, At: 1700000000000, Body: env(hello{Nonce: make([]byte, 32), Role: "controller", Purpose: "dispatch"})})
	other := mustKey(t)
	otherMsg, _ := Sign1(other, env(goodEnv))
	hybrid, err := SignHybrid(fuzzHybrid, []byte("a route record"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][][]byte{
		"FuzzReadFrame": {
			prefixed([]byte("a small frame")),
			prefixed(signed),
			{0, 0, 4, 1}, // declares 1025, past the fuzz bound
			{0, 0, 0, 0},
			{0, 0, 1},
			{0, 0, 0, 9, 'x'},
		},
		"FuzzEnvelope": {
			env(goodEnv),
			env(map[string]any{"v": 1, "t": "x", "ch": []byte{1}, "seq": 1, "id": "i", "at": 0, "body": nil, "more": 1}),
			{0xa2, 0x61, 'v', 0x01, 0x61, 'v', 0x01}, // duplicate key
			env(map[string]any{"v": "1", "t": 2}),    // wrong types
			nested(MaxNesting + 1),
			env(Envelope{V: 2, T: "x", Body: []byte{0xf6}}),
		},
		"FuzzVerify1": {
			signed,
			hello,
			otherMsg,
			signed[:len(signed)-1],
			signed[1:],
			append(bytes.Clone(signed), 0),
		},
		"FuzzVerifyHybrid": {
			hybrid,
			hybrid[:200],
			signed,
		},
		"FuzzParsePublicKey": {
			fuzzKey.Public().MarshalCOSEKey(),
			fuzzKey.marshalPrivateCOSEKey(),
			fuzzHybrid.Public().MarshalCOSEKey(),
			{0xa3, 0x01, 0x01, 0x20, 0x04, 0x21, 0x40},
		},
	}
}

func corpusFile(b []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
}

func parseCorpusFile(s string) ([]byte, bool) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		return nil, false
	}
	u, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	return []byte(u), err == nil
}

func TestFuzzCorpus(t *testing.T) {
	seeds := fuzzSeeds(t)
	if os.Getenv("WIRE_WRITE_CORPUS") == "1" {
		for target, list := range seeds {
			dir := filepath.Join("testdata", "fuzz", target)
			os.RemoveAll(dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, b := range list {
				if err := os.WriteFile(filepath.Join(dir, "seed"+strconv.Itoa(i)), []byte(corpusFile(b)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for target, list := range seeds {
		entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", target))
		if err != nil || len(entries) < len(list) {
			t.Fatalf("%s: seed corpus has %d files, want at least %d (%v); regenerate with WIRE_WRITE_CORPUS=1", target, len(entries), len(list), err)
		}
		for _, e := range entries {
			raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			b, ok := parseCorpusFile(string(raw))
			if !ok {
				t.Fatalf("%s/%s is not in the Go corpus format", target, e.Name())
			}
			// The first signed seeds must still verify, or the fuzzer would
			// never reach past the signature check.
			if target == "FuzzVerify1" && e.Name() == "seed0" {
				if _, _, err := Verify1(b, NewKeyring(fuzzKey.Public())); err != nil {
					t.Fatalf("FuzzVerify1/seed0 no longer verifies: %v", err)
				}
			}
			if target == "FuzzVerifyHybrid" && e.Name() == "seed0" {
				if _, err := VerifyHybrid(b, fuzzHybrid.Public()); err != nil {
					t.Fatalf("FuzzVerifyHybrid/seed0 no longer verifies: %v", err)
				}
			}
		}
	}
}
