package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// cborHead is a CBOR head of major type major and argument n.
func cborHead(major byte, n uint64) []byte {
	b := []byte{major<<5 | 27}
	return binary.BigEndian.AppendUint64(b, n)
}

// cborText is a CBOR text string.
func cborText(s string) []byte { return append(cborHead(3, uint64(len(s))), s...) }

// stateWith is the encoding of an empty state with field's value replaced
// by value (CBOR bytes).
func stateWith(field string, value []byte) []byte {
	fields := map[string][]byte{"open": {0x80}, "requests": {0x80}, "fg": {0x80}, "day": {0x00}, "spent": {0xa0}}
	fields[field] = value
	b := cborHead(5, uint64(len(fields)))
	for _, k := range []string{"day", "fg", "open", "spent", "requests"} {
		b = append(append(b, cborText(k)...), fields[k]...)
	}
	return b
}

// TestStateBounds: each bound of a decoded state refused one past it,
// with the exact error, and taken at it.
func TestStateBounds(t *testing.T) {
	items := func(n int, item []byte) []byte {
		return append(cborHead(4, uint64(n)), bytes.Repeat(item, n)...)
	}
	pairs := func(n int) []byte {
		b := cborHead(5, uint64(n))
		for i := range n {
			b = append(append(b, cborText(fmt.Sprintf("p%07d", i))...), 0x01)
		}
		return b
	}
	nested := func(levels int) []byte { return append(bytes.Repeat([]byte{0x81}, levels-1), 0x80) }
	fg := mustMarshal(t, fgV1{ID: "x", Tool: "t"})
	cases := []struct {
		name string
		b    []byte
		want string // "" : decodes
	}{
		{"open attempts past MaxStateItems", stateWith("open", items(MaxStateItems+1, []byte{0xa0})),
			"ledger: state: cbor: exceeded max number of elements 65536 for CBOR array"},
		{"spending principals past MaxStateItems", stateWith("spent", pairs(MaxStateItems+1)),
			"ledger: state: cbor: exceeded max number of key-value pairs 65536 for CBOR map"},
		{"principals at MaxStateItems", stateWith("spent", pairs(MaxStateItems)), ""},
		{"nesting past MaxStateNesting", stateWith("open", nested(MaxStateNesting)),
			"ledger: state: cbor: exceeded max nested level 8"},
		{"nesting at MaxStateNesting", stateWith("day", nested(MaxStateNesting-1)),
			"ledger: state: cbor: cannot unmarshal array into Go struct field ledger.stateV1.day of type int64"},
		{"an unknown field", append(append(cborHead(5, 1), cborText("weather")...), 0x01),
			"ledger: state: cbor: found unknown field at map element index 0"},
		{"a foreground request twice", stateWith("fg", append(cborHead(4, 2), append(fg, fg...)...)),
			`ledger: state: foreground request "x" is empty or twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeState(StateVersion, tc.b, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	if _, err := DecodeState(2, stateWith("day", []byte{0}), nil); err == nil || err.Error() != "ledger: a state of version 2; this controller reads version 1" {
		t.Fatalf("version 2: %v", err)
	}
}

// TestEncodeBound: a ledger holding more than MaxStateItems of anything
// is not encoded (no snapshot Decode would refuse is written); at the
// bound it is.
func TestEncodeBound(t *testing.T) {
	l := New()
	for i := range MaxStateItems {
		l.spent[fmt.Sprintf("p%07d", i)] = 1
	}
	if _, err := l.Encode(); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	l.spent["one more"] = 1
	if _, err := l.Encode(); err == nil || err.Error() != "ledger: 65537 principals, more than a snapshot holds (65536)" {
		t.Fatalf("past the bound: %v", err)
	}
}

// TestStateRefusals: a state no replay gives is refused, saying what.
func TestStateRefusals(t *testing.T) {
	b := paidOn("a1", "r1", "x", 1)
	open := openV1{Begin: b, BeginSeq: 2, State: msg.StateUncertain}
	req := requestV1{Agent: "agent1", Application: "appliance", RequestID: "r1", Attempt: "a1", SHA256: b.RequestSHA256, State: msg.StateUncertain}
	ended := req
	ended.State, ended.EndSeq = msg.StateDefinite, 3
	definite := open
	definite.State = msg.StateDefinite
	other := req
	other.Attempt = "a9"
	cases := []struct {
		name    string
		s       stateV1
		indexed bool
		want    string
	}{
		{"an attempt twice", stateV1{Open: []openV1{open, open}}, false, "ledger: state: attempt a1 is open twice"},
		{"an attempt open as definite", stateV1{Open: []openV1{definite}}, false,
			`ledger: state: attempt a1 is open in state "definite", which no replay leaves`},
		{"a requestId of no open attempt", stateV1{Open: []openV1{open}, Requests: []requestV1{other}}, false,
			`ledger: state: requestId "r1" names attempt a9, which is not open with it in state "uncertain"`},
		{"a requestId twice", stateV1{Open: []openV1{open}, Requests: []requestV1{req, req}}, false,
			`ledger: state: requestId "r1" of agent "agent1" and application "appliance" is there twice`},
		{"an ended requestId beside an index", stateV1{Requests: []requestV1{ended}}, true,
			`ledger: state: requestId "r1" ended at record 3, but with a history index an ended requestId is in the index, not in a snapshot`},
		{"an ended requestId without an index", stateV1{Requests: []requestV1{ended}}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			enc := mustMarshal(t, tc.s)
			var x Index
			if tc.indexed {
				x = newIndex(t)
			}
			_, err := DecodeState(StateVersion, enc, x)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	if strings.Contains(fmt.Sprint(cases), "\n") {
		t.Fatal("an error of more than one line")
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := wire.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
