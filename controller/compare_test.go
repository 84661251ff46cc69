package controller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// TestCompareReceipts: the host's export agrees with what the controller
// recorded; an export with a receipt omitted, truncated, swapped for
// another genuine receipt, or holding a receipt for an attempt this
// controller never began is found from the controller's side, with the
// host's own key signing every forgery.
func TestCompareReceipts(t *testing.T) {
	s := newStack(t, stackOpts{price: 3, funded: 100})
	s.startController()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := s.client(ctx)
	for _, id := range []string{"cmp-1", "cmp-2"} {
		if r, res := call(t, ctx, cs, ToolCall, callArgs(id, map[string]any{"text": id})); res.IsError || r.Outcome != msg.StateDefinite {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	cs.Close()
	s.stopController()
	s.stop()

	export, err := audit.ExportStore(s.store)
	if err != nil {
		t.Fatal(err)
	}
	var f msg.ReceiptsFile
	if err := wire.Unmarshal(export, &f); err != nil {
		t.Fatal(err)
	}
	c, err := CompareReceipts(s.cfgPath, export)
	if err != nil || len(c.Findings) != 0 || c.Recorded != 2 || c.Matched != 2 || c.Exported != 2 || c.LastExported != c.LastRecorded {
		t.Fatalf("the honest export: %+v %v", c, err)
	}

	hostKey, err := wire.ReadHybridKey(filepath.Join(s.store, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	last, _ := msg.VerifyReceipt(f.Receipts[len(f.Receipts)-1], wire.NewKeyring(hostKey.Ed25519().Public()))
	ghost := last
	ghost.Seq, ghost.Attempt, ghost.Prev = last.Seq+1, "ghost-attempt", msg.ReceiptHash(f.Receipts[len(f.Receipts)-1])
	ghostSigned, err := msg.SignReceipt(hostKey.Ed25519(), ghost)
	if err != nil {
		t.Fatal(err)
	}
	other := last
	other.Status = 500
	otherSigned, _ := msg.SignReceipt(hostKey.Ed25519(), other)
	for _, tc := range []struct {
		name     string
		receipts [][]byte
		want     []string
	}{
		{"truncated", f.Receipts[:len(f.Receipts)-1], []string{
			"attempt " + last.Attempt + ": the receipt recorded here is not in the file",
			"the file is truncated"}},
		{"swapped", append(append([][]byte{}, f.Receipts[:len(f.Receipts)-1]...), otherSigned), []string{
			"attempt " + last.Attempt + ": the file's receipt differs from the one recorded here"}},
		{"a receipt for an attempt never begun", append(append([][]byte{}, f.Receipts...), ghostSigned), []string{
			"is for attempt ghost-attempt, which this controller never began"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := wire.Marshal(msg.ReceiptsFile{HostKey: f.HostKey, Receipts: tc.receipts, Checkpoints: f.Checkpoints})
			if err != nil {
				t.Fatal(err)
			}
			c, err := CompareReceipts(s.cfgPath, b)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(c.Findings, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("findings lack %q:\n%s", w, all)
				}
			}
		})
	}
}
