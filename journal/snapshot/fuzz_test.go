package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Load's decoding of a file, with
// the operator key's verifier and with none. It must never panic, and
// what it accepts must verify on its own: strictly an envelope, its
// SHA-256 matching, signed by the operator key (or, with no verifier,
// unsigned), of the format asked, and exactly the file Write makes of the
// snapshot it returns (ed25519 signatures are deterministic).
func FuzzDecode(f *testing.F) {
	for _, c := range corpus(f) {
		f.Add(c.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decode(b, testFormat, verify); err == nil {
			checkAccepted(t, b, s, true)
		}
		if s, err := decode(b, testFormat, nil); err == nil {
			checkAccepted(t, b, s, false)
		}
	})
}

func checkAccepted(t *testing.T, b []byte, s Snapshot, signed bool) {
	t.Helper()
	var env envelope
	if err := decMode.Unmarshal(b, &env); err != nil {
		t.Fatalf("accepted what does not decode: %v", err)
	}
	d := digest(env.Content)
	if !bytes.Equal(d, env.SHA256) {
		t.Fatalf("accepted a digest that does not match")
	}
	pub := testKey.Public().(ed25519.PublicKey)
	if signed && !ed25519.Verify(pub, d, env.Sig) {
		t.Fatalf("accepted a signature that does not verify")
	}
	if !signed && env.Sig != nil {
		t.Fatalf("accepted a signed snapshot without a verifier")
	}
	if s.Format != testFormat || check(s) != nil {
		t.Fatalf("accepted %+v", s)
	}
	var signer func([]byte) ([]byte, error)
	if signed {
		signer = sign
	}
	f, err := encode(s, signer)
	if err != nil || !bytes.Equal(append(f.head, f.content...), b) {
		t.Fatalf("accepted %x, which Write would make as %x (%v)", b, append(f.head, f.content...), err)
	}
}

// seed is a corpus entry: a file and what it is.
type seed struct {
	name string
	b    []byte
}

// corpus is the seed corpus: valid files and each kind of damage.
func corpus(t testing.TB) []seed {
	whole := func(s Snapshot, sign func([]byte) ([]byte, error)) []byte {
		f, err := encode(s, sign)
		if err != nil {
			t.Fatal(err)
		}
		return append(f.head, f.content...)
	}
	signed := whole(snap(3), sign)
	flipped := bytes.Clone(signed)
	flipped[len(flipped)-2] ^= 1
	other := snap(4)
	other.Format = "other-format"
	return []seed{
		{"signed", signed},
		{"unsigned", whole(snap(5), nil)},
		{"other-format", whole(other, sign)},
		{"bit-flipped", flipped},
		{"truncated", signed[:len(signed)/2]},
		{"empty", nil},
		{"empty-map", []byte{0xa0}},
	}
}

// TestWriteFuzzCorpus writes the seed corpus to testdata/fuzz/FuzzDecode
// when SNAPSHOT_WRITE_CORPUS=1 (go test -run TestWriteFuzzCorpus), and
// otherwise checks that the committed corpus is what it would write.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for _, s := range corpus(t) {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.b)
		path := filepath.Join(dir, s.name)
		if os.Getenv("SNAPSHOT_WRITE_CORPUS") == "1" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s is not the seed corpus entry (SNAPSHOT_WRITE_CORPUS=1 rewrites it): %v", path, err)
		}
	}
}
