package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProxyBatch: a batch (a JSON array) is forwarded when it is an array
// of one to MaxBatchMembers JSON values, its members' nesting left to the
// MCP socket (a member at MaxNesting+1 is forwarded, though the line nests
// one deeper); an empty batch, one member past the bound, and a batch that
// is not JSON are answered with id null and not forwarded.
func TestProxyBatch(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mcp.sock")
	echo := startEcho(t, sock)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- RunProxy(ctx, sock, inR, outW); outW.Close() }()
	out := bufio.NewReaderSize(outR, 1<<20)

	// Notifications only: the echo answers no call the proxy counts.
	notice := `{"jsonrpc":"2.0","method":"notifications/x"}`
	batch := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(notice+",", n), ",") + "]\n" }
	deep := `[{"jsonrpc":"2.0","method":"n","params":` + strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting) + "}]\n"
	var forwarded []byte
	for _, tc := range []struct{ line, want string }{
		{batch(MaxBatchMembers), ""},
		{deep, ""},
		{"[]\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"steward mcp: an empty batch is not a request; a batch holds one message or more"}}` + "\n"},
		{batch(MaxBatchMembers + 1), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"steward mcp: a batch of 129 messages exceeds the bound of 128 messages; nothing of it was run"}}` + "\n"},
		{"[" + notice + ",]\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"steward mcp: request line is not JSON"}}` + "\n"},
		{"[" + notice + ",{\"a\":}]\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"steward mcp: request line is not JSON"}}` + "\n"},
	} {
		go inW.Write([]byte(tc.line))
		want := tc.want
		if want == "" {
			want = tc.line // echoed: it was forwarded
			forwarded = append(forwarded, tc.line...)
		}
		got, err := out.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("%.80s:\n got %.200s (%v)\nwant %.200s", tc.line, got, err, want)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("proxy: %v", err)
	}
	<-echo.done
	echo.mu.Lock()
	defer echo.mu.Unlock()
	if !bytes.Equal(echo.got.Bytes(), forwarded) {
		t.Fatalf("the socket received %d bytes, want exactly the two admitted batches (%d bytes)", echo.got.Len(), len(forwarded))
	}
}

// FuzzCheckBatch holds CheckBatch to encoding/json on batches whose
// members nest within the bound: it admits exactly the JSON arrays of 1 to
// MaxBatchMembers values, and its members are the array's elements.
func FuzzCheckBatch(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `[1]`, `[1,]`, `[,1]`, `[{"a":"]"},"\"",[[]]]`, `[1]x`, `[{"a":}]`, `["\\"]`, `[1 2]`, `[[1],{"b":[2]}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !IsBatch(line) || len(line) > MaxLine {
			return
		}
		var scan IDScan
		scan.Write(line)
		if scan.MaxDepth() > MaxNesting {
			return // a member may be past the bound: the member check's refusal
		}
		members, _, _, ok := CheckBatch(line)
		var want []json.RawMessage
		valid := json.Unmarshal(line, &want) == nil && len(want) > 0 && len(want) <= MaxBatchMembers
		if ok != valid {
			t.Fatalf("%q: CheckBatch ok %v, encoding/json %v", line, ok, valid)
		}
		if !ok {
			return
		}
		if len(members) != len(want) {
			t.Fatalf("%q: %d members, want %d", line, len(members), len(want))
		}
		for i := range want {
			if !bytes.Equal(bytes.TrimSpace(want[i]), members[i]) {
				t.Fatalf("%q: member %d is %q, want %q", line, i, members[i], want[i])
			}
		}
	})
}
