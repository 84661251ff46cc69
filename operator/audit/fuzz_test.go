package audit_test

import (
	"testing"

	"github.com/stewardrt/steward/operator/audit"
	"github.com/stewardrt/steward/wire"
)

// FuzzReceiptsFile: an exported receipts file may come from anyone.
func FuzzReceiptsFile(f *testing.F) {
	f.Add([]byte{0xa3, 0x67, 'h', 'o', 's', 't', 'K', 'e', 'y', 0x40, 0x68, 'r', 'e', 'c', 'e', 'i', 'p', 't', 's', 0x80, 0x6b, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't', 's', 0x80})
	// The verifier's own keys: a file never supplies them.
	host, err := wire.GenerateHybridKey()
	if err != nil {
		f.Fatal(err)
	}
	disp, err := wire.GenerateSigningKey()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		audit.VerifyFileKeys(b, audit.FileKeys{Host: host.Public(), Dispatch: disp.Public()})
	})
}
