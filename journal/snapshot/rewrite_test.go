package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"golang.org/x/sys/unix"
)

// flip flips a byte of the file at path, off bytes from its end.
func flip(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)+off] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// cut truncates the file at path to half its size.
func cut(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// rewrite decodes the file at path, lets change make new file bytes of
// its envelope and content, and writes them back.
func rewrite(t *testing.T, path string, change func(t *testing.T, env envelope, c content) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope
	var c content
	if err := decMode.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if err := decMode.Unmarshal(env.Content, &c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, change(t, env, c), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reseal encodes c as a whole valid envelope, signed by key (or unsigned).
func reseal(t *testing.T, c content, key ed25519.PrivateKey) []byte {
	t.Helper()
	cb, err := encMode.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	env := envelope{Content: cb, SHA256: digest(cb)}
	if key != nil {
		env.Sig = ed25519.Sign(key, env.SHA256)
	}
	b, err := encMode.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// otherFormat is a valid, signed snapshot of another format.
func otherFormat(t *testing.T, _ envelope, c content) []byte {
	c.Format = "other-format"
	return reseal(t, c, testKey)
}

// unsign drops the signature.
func unsign(t *testing.T, _ envelope, c content) []byte { return reseal(t, c, nil) }

// forge signs with a key that is not the operator's.
func forge(t *testing.T, _ envelope, c content) []byte {
	return reseal(t, c, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize)))
}

// extraField adds a field the envelope does not have.
func extraField(t *testing.T, env envelope, _ content) []byte {
	b, err := encMode.Marshal(map[string]any{"content": env.Content, "sha256": env.SHA256, "sig": env.Sig, "zzz": 1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nonCanonical encodes the envelope with its keys in field order, not in
// the deterministic order.
func nonCanonical(t *testing.T, env envelope, _ content) []byte {
	em, err := cbor.EncOptions{Sort: cbor.SortNone}.EncMode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := em.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lockFile opens path and holds an flock on it, as a Write under way does.
func lockFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
