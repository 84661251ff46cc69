package mcpproxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// wantID is the id encoding/json reads at the top level of a valid line, as
// IDScan should report it: the raw token of a string or number of at most
// MaxIDBytes, else nil.
func wantID(t *testing.T, line []byte) ([]byte, bool) {
	t.Helper()
	if !json.Valid(line) {
		return nil, false // not JSON: nothing to compare
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return nil, true // not an object: no id
	}
	raw, ok := m["id"]
	if !ok || len(raw) == 0 || len(raw) > MaxIDBytes {
		return nil, true
	}
	if raw[0] != '"' && raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil, true
	}
	return raw, true
}

// scanPieces feeds line to a new IDScan in pieces of n bytes.
func scanPieces(line []byte, n int) *IDScan {
	var s IDScan
	for len(line) > 0 {
		k := min(n, len(line))
		s.Write(line[:k])
		line = line[k:]
	}
	return &s
}

func TestIDScanAgainstEncodingJSON(t *testing.T) {
	pad := strings.Repeat("p", 3*MaxLine)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":"` + pad + `"}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"id":9,"x":"` + pad + `"},"id":"last"}`,
		`{"jsonrpc":"2.0","method":"x","params":{"a":[{"id":1},"\"id\":2"]},"id":-12.5e3}`,
		` { "id" : "a\"b\\" , "method" : "m" } `,
		`{"\u0069\u0064":7,"method":"m"}`,
		`{"i\u0064":"x"}`,
		`{"id":1,"id":2}`,
		`{"id":1,"id":null}`,
		`{"id":1,"id":{"a":1}}`,
		`{"id":1,"id":[2]}`,
		`{"id":true}`,
		`{"id":"` + strings.Repeat("i", MaxIDBytes-2) + `"}`,
		`{"id":"` + strings.Repeat("i", MaxIDBytes-1) + `"}`,
		`{"ID":3}`,
		`{"idd":3,"d":4}`,
		`{"":1,"x":{"id":2}}`,
		`[{"id":1}]`,
		`"id"`,
		`{}`,
		`{"a":"\\","id":5}`,
		`{"a":"\u005c","id":6}`,
	} {
		want, ok := wantID(t, []byte(line))
		if !ok {
			t.Fatalf("not JSON: %s", line)
		}
		for _, n := range []int{1, 2, 7, 4096, len(line)} {
			if got := scanPieces([]byte(line), n).ID(); !bytes.Equal(got, want) {
				t.Errorf("%.80s in pieces of %d: id %s, want %s", line, n, got, want)
			}
		}
	}
}

func TestIDScanDepth(t *testing.T) {
	for _, tc := range []struct {
		line  string
		depth int
	}{
		{`{}`, 1},
		{`{"a":[{}],"b":"[[[[{{{"}`, 3},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), 100},
		{`"x"`, 0},
	} {
		if got := scanPieces([]byte(tc.line), 3).MaxDepth(); got != tc.depth {
			t.Errorf("%s: depth %d, want %d", tc.line, got, tc.depth)
		}
	}
}

// TestIDScanAllocates holds the scan to a fixed state: reading a line of
// any length allocates nothing.
func TestIDScanAllocates(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","method":"m","params":{"x":"` + strings.Repeat("\\\"a", MaxLine) + `"},"\u0069d":"abc"}`)
	var s IDScan
	allocs := testing.AllocsPerRun(10, func() {
		s = IDScan{}
		s.Write(line)
	})
	if allocs != 0 || string(s.ID()) != `"abc"` {
		t.Fatalf("%v allocations, id %s", allocs, s.ID())
	}
}

// FuzzIDScan holds IDScan to encoding/json on what is valid, and to its
// promises on anything: it does not panic, its id is a JSON string or
// number of at most MaxIDBytes, and the pieces the line comes in do not
// change what it finds.
func FuzzIDScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"id":[1,"]"]},"id":"z"}`,
		`{"\u0069d":3,"method":null}`,
		`{"id":1e3,"id":-2.5}`,
		`{"id":"a\\\"","x":"\"id\":4"}`,
		`[{"id":1}]`,
		`{"id":1`,
		`{"id":"unterminated`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, piece uint8) {
		whole := scanPieces(b, len(b)+1)
		split := scanPieces(b, int(piece)+1)
		id := whole.ID()
		if !bytes.Equal(id, split.ID()) || whole.MaxDepth() != split.MaxDepth() {
			t.Fatalf("%q: whole %s depth %d, in pieces of %d %s depth %d", b, id, whole.MaxDepth(), piece+1, split.ID(), split.MaxDepth())
		}
		if id != nil && (len(id) > MaxIDBytes || !json.Valid(id) || !(id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9')) {
			t.Fatalf("%q: id %q is not a JSON string or number of at most %d bytes", b, id, MaxIDBytes)
		}
		if !json.Valid(b) {
			return
		}
		if want, ok := wantID(t, b); ok && !bytes.Equal(id, want) {
			t.Fatalf("%q: id %s, encoding/json reads %s", b, id, want)
		}
	})
}

// BenchmarkCheckLine is what the proxy and the MCP socket add to each
// line: a typical tools/call line and one at the bound.
func BenchmarkCheckLine(b *testing.B) {
	call := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"oracle_call","arguments":{"application":"appliance","requestId":"r-1","conversationId":"c-1","operationId":"calc.evaluate","arguments":{"expression":"1 + 1"}}}}` + "\n")
	for _, tc := range []struct {
		name string
		line []byte
	}{{"call", call}, {"at-bound", idLine(MaxLine, "7", false)}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.line)))
			for b.Loop() {
				if _, _, _, ok := CheckLine(tc.line); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}
