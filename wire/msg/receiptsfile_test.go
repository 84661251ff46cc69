package msg

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/stewardrt/steward/wire"
)

// TestReceiptsFilePages: a file whose lists fit one CBOR array keeps its
// first form byte for byte; one receipt or checkpoint past wire.MaxEntries
// goes out in pages and reads back whole (plain wire.Marshal refuses it).
func TestReceiptsFilePages(t *testing.T) {
	file := func(receipts, checkpoints int) ReceiptsFile {
		f := ReceiptsFile{HostKey: []byte("host")}
		for i := range receipts {
			f.Receipts = append(f.Receipts, []byte(fmt.Sprintf("r%d", i)))
		}
		for i := range checkpoints {
			f.Checkpoints = append(f.Checkpoints, []byte(fmt.Sprintf("c%d", i)))
		}
		return f
	}
	at := file(wire.MaxEntries, 2)
	b, err := MarshalReceiptsFile(at)
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := wire.Marshal(at); !bytes.Equal(b, plain) {
		t.Fatal("a file at the bound changed its form")
	}
	for _, f := range []ReceiptsFile{file(wire.MaxEntries+1, 2), file(3, wire.MaxEntries+1), file(3*wire.MaxEntries+7, 5)} {
		if _, err := wire.Marshal(f); err == nil {
			t.Fatalf("wire.Marshal took %d receipts in one array", len(f.Receipts))
		}
		b, err := MarshalReceiptsFile(f)
		if err != nil {
			t.Fatalf("%d receipts, %d checkpoints: %v", len(f.Receipts), len(f.Checkpoints), err)
		}
		got, err := UnmarshalReceiptsFile(b)
		if err != nil || !reflect.DeepEqual(got, f) {
			t.Fatalf("%d receipts, %d checkpoints did not read back: %v", len(f.Receipts), len(f.Checkpoints), err)
		}
	}
	if _, err := UnmarshalReceiptsFile([]byte{0xa1, 0x61, 'x', 0x01}); err == nil {
		t.Fatal("a map with an unknown field was read as a receipts file")
	}
}
