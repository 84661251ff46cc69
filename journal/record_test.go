package journal

import (
	"bytes"
	"strings"
	"testing"
)

// TestPayloadMatchesLibrary holds the hand-written envelope encoder to the
// library's core deterministic encoding of Record.
func TestPayloadMatchesLibrary(t *testing.T) {
	var prev [32]byte
	for i := range prev {
		prev[i] = byte(i * 7)
	}
	bodies := []any{nil, 0, -1, "x", map[string]any{"b": 1, "a": []any{1, "two", 3.5}}, bytes.Repeat([]byte{9}, 300)}
	seqs := []uint64{1, 23, 24, 255, 256, 65535, 65536, 1 << 32, 1<<64 - 1}
	ats := []int64{0, 23, 24, -1, -24, -25, -1 << 40, 1 << 40, 1<<63 - 1, -1 << 63}
	kinds := []string{"a", strings.Repeat("k", 23), strings.Repeat("k", 24), strings.Repeat("k", MaxKindBytes)}
	for _, body := range bodies {
		raw, err := encMode.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range seqs {
			for _, at := range ats {
				for _, kind := range kinds {
					got := appendPayload(nil, seq, &prev, kind, at, raw)
					want, err := encMode.Marshal(Record{Seq: seq, Prev: prev[:], Kind: kind, At: at, Body: raw})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("seq %d at %d kind %q: hand encoding\n%x\nlibrary\n%x", seq, at, kind, got, want)
					}
					if n := payloadSize(seq, kind, at, len(raw)); n != len(got) {
						t.Fatalf("payloadSize = %d, encoding is %d bytes", n, len(got))
					}
					if !bytes.HasPrefix(got, payloadMagic) {
						t.Fatalf("payload %x does not start with the magic", got[:4])
					}
					var scratch []byte
					r, err := decodeRecord(got, &scratch)
					if err != nil || r.Seq != seq || r.At != at || r.Kind != kind || !bytes.Equal(r.Body, raw) || !bytes.Equal(r.Prev, prev[:]) {
						t.Fatalf("decode: %+v, %v", r, err)
					}
				}
			}
		}
	}
}

func TestDecodeRecordStrict(t *testing.T) {
	prev := make([]byte, 32)
	enc := func(v any) []byte {
		b, err := encMode.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := map[string]any{"seq": 1, "prev": prev, "kind": "k", "at": 5, "body": 0}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	var scratch []byte
	if _, err := decodeRecord(enc(good), &scratch); err != nil {
		t.Fatalf("good record refused: %v", err)
	}
	cases := map[string][]byte{
		"missing at":    enc(with("at", nil)),
		"missing body":  enc(with("body", nil)),
		"unknown field": enc(with("extra", 1)),
		"prev 31 bytes": enc(with("prev", make([]byte, 31))),
		"prev text":     enc(with("prev", strings.Repeat("x", 32))),
		"seq 0":         enc(with("seq", 0)),
		"seq negative":  enc(with("seq", -1)),
		"bad kind":      enc(with("kind", "a b")),
		"empty kind":    enc(with("kind", "")),
		"kind too long": enc(with("kind", strings.Repeat("k", MaxKindBytes+1))),
		// seq 1 as a two-byte integer: decodes, but is not deterministic.
		"non-shortest int": bytes.Replace(enc(good), []byte{0x63, 's', 'e', 'q', 0x01}, []byte{0x63, 's', 'e', 'q', 0x18, 0x01}, 1),
		// The same map with keys in length-first but swapped order.
		"unsorted keys": func() []byte {
			b := enc(good)
			i := bytes.Index(b, []byte{0x63, 's', 'e', 'q'})
			j := bytes.Index(b, []byte{0x62, 'a', 't'})
			out := append([]byte{0xa5}, b[i:i+5]...)
			out = append(out, b[j:j+4]...)
			return append(out, b[i+5:]...)
		}(),
		"duplicate key":   append(append([]byte{0xa6}, enc(good)[1:]...), 0x62, 'a', 't', 0x05),
		"indefinite map":  append(append([]byte{0xbf}, enc(good)[1:]...), 0xff),
		"trailing byte":   append(enc(good), 0),
		"truncated":       enc(good)[:20],
		"not a map":       enc([]int{1, 2}),
		"empty":           {},
		"nested too deep": enc(with("body", nest(MaxNestedLevels))),
	}
	for name, b := range cases {
		if r, err := decodeRecord(b, &scratch); err == nil {
			t.Errorf("%s: decoded %+v, want refusal", name, r)
		}
	}
	// The deepest body a record can carry decodes.
	if _, err := decodeRecord(enc(with("body", nest(MaxNestedLevels-1))), &scratch); err != nil {
		t.Errorf("body nested %d levels refused: %v", MaxNestedLevels-1, err)
	}
}

// nest returns a value of levels nested arrays.
func nest(levels int) any {
	var v any = 1
	for i := 0; i < levels; i++ {
		v = []any{v}
	}
	return v
}

func TestDecodeFrame(t *testing.T) {
	var prev [32]byte
	body, _ := encMode.Marshal("hi")
	payload := appendPayload(nil, 3, &prev, "k", 9, body)
	frame := make([]byte, headerSize, headerSize+len(payload))
	frame = append(frame, payload...)
	putHeader(frame, payload)
	var scratch []byte
	r, p, n, err := decodeFrame(append(frame, 0, 0), &scratch)
	if err != nil || r.Seq != 3 || n != len(frame) || !bytes.Equal(p, payload) {
		t.Fatalf("decodeFrame: %+v %d %v", r, n, err)
	}
	for i := 0; i < len(frame); i++ {
		if _, _, _, err := decodeFrame(frame[:i], &scratch); err == nil {
			t.Fatalf("frame cut to %d bytes decoded", i)
		}
	}
	bad := append([]byte(nil), frame...)
	bad[len(bad)-1] ^= 1
	if _, _, _, err := decodeFrame(bad, &scratch); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("flipped bit: %v, want checksum mismatch", err)
	}
}
