package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestProxyBatchAnsweredBeforeEOF runs the real proxy binary against a
// real controller with batches in the session and stdin closed at once:
// the proxy counts a batch's calls, the socket answers each (one line per
// request at 2025-06-18, one array at 2025-03-26, refused or served), and
// the proxy exits 0 with every answer printed.
func TestProxyBatchAnsweredBeforeEOF(t *testing.T) {
	s := newStack(t, stackOpts{})
	s.startController()
	bin := controllerBin(t)
	initialize := func(version string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, version) + "\n" +
			noticeMsg + "\n"
	}
	notPart := "steward: batches are not part of MCP protocol version 2025-06-18; send each message on a line of its own"
	notice := "steward: not run: its batch holds a notification, which this server does not serve in a batch; send notifications on lines of their own"
	for _, tc := range []struct {
		version, batches string
		want             []string // besides the initialize's answer
	}{
		{"2025-06-18", "[" + ping(`"a"`) + "," + ping("2") + "]\n" + ping("3") + "\n",
			[]string{errLine(`"a"`, -32600, notPart), errLine("2", -32600, notPart), `{"jsonrpc":"2.0","id":3,"result":{}}`}},
		{"2025-03-26", "[" + ping("2") + "," + noticeMsg + "]\n" + "[" + ping(`"b"`) + "]\n",
			[]string{"[" + errLine("2", -32600, notice) + "]", `[{"jsonrpc":"2.0","id":"b","result":{}}]`}},
	} {
		lines, stderr, err := runProxyBinary(t, bin, s.cfg.Sockets.MCP, initialize(tc.version)+tc.batches)
		if err != nil {
			t.Fatalf("%s: proxy: %v: %s", tc.version, err, stderr)
		}
		// Answers come as they are made: steward's to a refused batch may
		// overtake go-sdk's to the initialize before it.
		var got []string
		for _, l := range lines {
			if l = strings.TrimSuffix(l, "\n"); !strings.HasPrefix(l, `{"jsonrpc":"2.0","id":1,"result":`) {
				got = append(got, l)
			}
		}
		if len(lines) != 1+len(tc.want) || len(got) != len(tc.want) {
			t.Fatalf("%s: stdout %q", tc.version, lines)
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		for i, want := range tc.want {
			if got[i] != want {
				t.Fatalf("%s: answer %d\n got %s\nwant %s", tc.version, i, got[i], want)
			}
		}
	}
}
