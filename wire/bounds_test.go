package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stewardrt/steward/internal/cborhead"
)

var frameBounds = []struct {
	name  string
	limit int
	text  string
}{
	{"request", MaxRequestFrame, "request frame bound of 262144 bytes"},
	{"reply", MaxReplyFrame, "reply frame bound of 1048576 bytes"},
}

func TestWriteFrameBound(t *testing.T) {
	for _, b := range frameBounds {
		t.Run(b.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteFrame(&buf, make([]byte, b.limit), b.limit); err != nil {
				t.Fatalf("frame at the bound: %v", err)
			}
			if buf.Len() != 4+b.limit || binary.BigEndian.Uint32(buf.Bytes()) != uint32(b.limit) {
				t.Fatalf("frame at the bound wrote %d bytes with prefix %d", buf.Len(), binary.BigEndian.Uint32(buf.Bytes()))
			}
			buf.Reset()
			err := WriteFrame(&buf, make([]byte, b.limit+1), b.limit)
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("frame one past the bound: err %v, want ErrFrameTooLarge", err)
			}
			want := fmt.Sprintf("wire: frame of %d bytes exceeds the %s", b.limit+1, b.text)
			if err.Error() != want {
				t.Fatalf("error %q, want %q", err, want)
			}
			if buf.Len() != 0 {
				t.Fatalf("refused frame wrote %d bytes", buf.Len())
			}
		})
	}
}

// countingReader records how many bytes were taken from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadFrameBound(t *testing.T) {
	for _, b := range frameBounds {
		t.Run(b.name, func(t *testing.T) {
			body := bytes.Repeat([]byte{0xa5}, b.limit+1)
			frame := func(n int) []byte {
				return append(binary.BigEndian.AppendUint32(nil, uint32(n)), body[:n]...)
			}
			msg, err := ReadFrame(bytes.NewReader(frame(b.limit)), b.limit)
			if err != nil || len(msg) != b.limit {
				t.Fatalf("frame at the bound: %d bytes, %v", len(msg), err)
			}

			cr := &countingReader{r: bytes.NewReader(frame(b.limit + 1))}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			msg, err = ReadFrame(cr, b.limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFrameTooLarge) || msg != nil {
				t.Fatalf("frame one past the bound: %d bytes, err %v, want ErrFrameTooLarge", len(msg), err)
			}
			want := fmt.Sprintf("wire: frame of %d bytes exceeds the %s", b.limit+1, b.text)
			if err.Error() != want {
				t.Fatalf("error %q, want %q", err, want)
			}
			if cr.n != 4 {
				t.Fatalf("refused frame: read %d bytes, want only the 4-byte prefix", cr.n)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew >= uint64(b.limit) {
				t.Fatalf("refused frame: allocated %d bytes, the body was allocated", grew)
			}
		})
	}
}

func TestReadFrameEOF(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader(nil), MaxRequestFrame); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0}), MaxRequestFrame); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("half a prefix: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 5, 1, 2}), MaxRequestFrame); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v, want io.ErrUnexpectedEOF", err)
	}
}

// nested returns depth nested arrays, the innermost empty: [[...[]...]].
func nested(depth int) []byte {
	return append(bytes.Repeat([]byte{0x81}, depth-1), 0x80)
}

func TestNestingBound(t *testing.T) {
	var v any
	if err := Unmarshal(nested(MaxNesting), &v); err != nil {
		t.Fatalf("nesting %d: %v", MaxNesting, err)
	}
	err := Unmarshal(nested(MaxNesting+1), &v)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "exceeded max nested level 16") {
		t.Fatalf("nesting %d: %v, want refusal naming the bound", MaxNesting+1, err)
	}
	// Maps and tags count too.
	deepMap := func(depth int) []byte { return append(bytes.Repeat([]byte{0xa1, 0x01}, depth), 0x00) }
	if err := Unmarshal(deepMap(MaxNesting), &v); err != nil {
		t.Fatalf("%d nested maps: %v", MaxNesting, err)
	}
	if err := Unmarshal(deepMap(MaxNesting+1), &v); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d nested maps: %v, want refusal", MaxNesting+1, err)
	}
	// A tag adds a level only when it encloses another tag (fxamacker's
	// rule), so a tag around 16 arrays is 16 levels, and so is a run of 17 tags.
	tagged := func(depth int) []byte { return append([]byte{0xd8, 0x64}, nested(depth)...) } // tag 100
	if err := Unmarshal(tagged(MaxNesting), &v); err != nil {
		t.Fatalf("tag around %d arrays: %v", MaxNesting, err)
	}
	if err := Unmarshal(tagged(MaxNesting+1), &v); !errors.Is(err, ErrMalformed) {
		t.Fatalf("tag around %d arrays: %v, want refusal", MaxNesting+1, err)
	}
	tags := func(n int) []byte { return append(bytes.Repeat([]byte{0xd8, 0x64}, n), 0x00) }
	if err := Unmarshal(tags(MaxNesting+1), &v); err != nil {
		t.Fatalf("%d nested tags: %v", MaxNesting+1, err)
	}
	if err := Unmarshal(tags(MaxNesting+2), &v); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d nested tags: %v, want refusal", MaxNesting+2, err)
	}
	// Marshal refuses what the peer would refuse.
	var deep any = []any{}
	for range MaxNesting - 1 {
		deep = []any{deep}
	}
	if _, err := Marshal(deep); err != nil {
		t.Fatalf("Marshal nesting %d: %v", MaxNesting, err)
	}
	if _, err := Marshal([]any{deep}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Marshal nesting %d: %v, want refusal", MaxNesting+1, err)
	}
}

func TestEntriesBound(t *testing.T) {
	array := func(n int) []byte {
		b := cborhead.Append(nil, majorArray, uint64(n))
		return append(b, make([]byte, n)...) // n zeros
	}
	cborMap := func(n int) []byte {
		b := cborhead.Append(nil, majorMap, uint64(n))
		for i := range n {
			b = cborhead.Append(b, majorUint, uint64(i))
			b = append(b, 0x00)
		}
		return b
	}
	var s []int
	if err := Unmarshal(array(MaxEntries), &s); err != nil || len(s) != MaxEntries {
		t.Fatalf("array of %d: %d, %v", MaxEntries, len(s), err)
	}
	if err := Unmarshal(array(MaxEntries+1), &s); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("array of %d: %v, want refusal naming the bound", MaxEntries+1, err)
	}
	var m map[int]int
	if err := Unmarshal(cborMap(MaxEntries), &m); err != nil || len(m) != MaxEntries {
		t.Fatalf("map of %d: %d, %v", MaxEntries, len(m), err)
	}
	if err := Unmarshal(cborMap(MaxEntries+1), &m); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("map of %d: %v, want refusal naming the bound", MaxEntries+1, err)
	}
	if _, err := Marshal(make([]int, MaxEntries)); err != nil {
		t.Fatalf("Marshal %d entries: %v", MaxEntries, err)
	}
	if _, err := Marshal(make([]int, MaxEntries+1)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Marshal %d entries: %v, want refusal", MaxEntries+1, err)
	}
}

type shape struct {
	A int    `cbor:"a"`
	B string `cbor:"b"`
}

func TestStrictShape(t *testing.T) {
	good, err := Marshal(shape{A: 1, B: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var s shape
	if err := Unmarshal(good, &s); err != nil || s != (shape{1, "x"}) {
		t.Fatalf("good: %+v, %v", s, err)
	}
	unknown, _ := Marshal(map[string]any{"a": 1, "b": "x", "c": true})
	wrongType, _ := Marshal(map[string]any{"a": "1", "b": "x"})
	// {"a": 1, "a": 2, "b": "x"}, written by hand: Marshal cannot produce it.
	dup := []byte{0xa3, 0x61, 'a', 0x01, 0x61, 'a', 0x02, 0x61, 'b', 0x61, 'x'}
	indefinite := []byte{0xbf, 0x61, 'a', 0x01, 0xff}
	badUTF8 := []byte{0xa1, 0x61, 'b', 0x61, 0xff}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"unknown field", unknown, "unknown field at map element index 2"},
		{"wrong type", wrongType, "cannot unmarshal UTF-8 text string into Go struct field wire.shape.a of type int"},
		{"duplicate key", dup, "duplicate map key"},
		{"trailing bytes", append(good, 0x00), "extraneous data"},
		{"indefinite length", indefinite, "indefinite-length"},
		{"invalid UTF-8", badUTF8, "invalid UTF-8"},
		{"truncated", good[:len(good)-1], "unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s shape
			err := Unmarshal(c.data, &s)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrMalformed containing %q", err, c.want)
			}
		})
	}
}

func TestMarshalDeterministic(t *testing.T) {
	// Map keys sort bytewise by their encoding (shorter first), integers and
	// lengths take their shortest form.
	b, err := Marshal(map[string]any{"bb": 1, "a": uint64(500), "c": -1})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xa3, 0x61, 'a', 0x19, 0x01, 0xf4, 0x61, 'c', 0x20, 0x62, 'b', 'b', 0x01}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x, want % x", b, want)
	}
}
