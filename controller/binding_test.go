package controller

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
)

// reformattedConfig is a controller config file as a person might write
// it: indented, members out of order, a \u escape, a trailing newline. It
// is not canonical JSON.
const reformattedConfig = "{\n  \"name\": \"\\u0064ev\",\n  \"stateDir\": \"/var/lib/stwt-binding/state\",\n  \"keyDir\": \"/var/lib/stwt-binding/keys\",\n  \"bundle\": \"/var/lib/stwt-binding/host.bundle\",\n  \"sockets\": {\"reverse\": \"/run/stwt-binding/reverse.sock\", \"mcp\": \"/run/stwt-binding/mcp.sock\", \"foreground\": \"/run/stwt-binding/fg.sock\"},\n  \"agents\": {\"uids\": [1000], \"gids\": []}\n}\n"

// reformattedBinding is the binding openJournal gave reformattedConfig
// when the journal canonicalized the config itself (journal.BindingOf of
// the raw file, commit c1109b1), before it took its config as opaque bytes.
// (The config lost its application fields since; its binding was
// recomputed with that commit's journal.BindingOf.)
const reformattedBinding = "096b7aa94b01c5c427c5705baa611594f15d07a3c7b6bd3c72ba9a2c8c265049"

// TestJournalBindingOfAConfigFile: the controller binds its journal to the
// canonical form of the config file's bytes, so a file that is not
// canonical binds exactly what it bound when the journal canonicalized,
// the journal records the canonical bytes (what the golden journals hold),
// and the same file reopens.
func TestJournalBindingOfAConfigFile(t *testing.T) {
	raw := []byte(reformattedConfig)
	if canon, err := canonjson.CanonicalJSON(raw); err != nil || bytes.Equal(canon, raw) {
		t.Fatalf("the test config must be valid and not canonical: %s, %v", canon, err)
	}
	path := filepath.Join(t.TempDir(), "controller.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = t.TempDir() // the binding covers the file's bytes, not this
	for range 2 {
		j, err := openJournal(cfg, loaded, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, config := j.Binding(), j.Config()
		j.Close()
		if got := hex.EncodeToString(b[:]); got != reformattedBinding {
			t.Fatalf("binding %s, want %s as before", got, reformattedBinding)
		}
		if canon, _ := canonjson.CanonicalJSON(raw); !bytes.Equal(config, canon) || sha256.Sum256(config) != b {
			t.Fatalf("journal config %s, want the canonical %s", config, canon)
		}
	}
	// A journal bound to another config refuses this one, naming both.
	other := journal.Options{Owner: JournalOwner, Format: JournalFormat, Config: []byte(`{"name":"other"}`)}
	cfg.StateDir = t.TempDir()
	j, err := journal.Open(cfg.JournalDir(), other)
	if err != nil {
		t.Fatal(err)
	}
	have := j.Binding()
	j.Close()
	want := "config binding mismatch: config binding " + reformattedBinding + " does not match the journal's " +
		hex.EncodeToString(have[:]) + ": enroll the new config with steward-installer controller-enroll"
	if _, err := openJournal(cfg, loaded, 1<<20); err == nil || err.Error() != want {
		t.Fatalf("other journal: %v, want %q", err, want)
	}
	// A config the canonical form refuses (encoding/json takes the last of
	// two equal keys; canonjson refuses them) opens no journal.
	dup := bytes.Replace(raw, []byte(`"name": "\u0064ev",`), []byte(`"name": "dev", "name": "dev",`), 1)
	if _, err := ParseConfig(dup); err != nil {
		t.Fatalf("ParseConfig(duplicate name): %v", err)
	}
	cfg.StateDir = t.TempDir()
	want = "controller journal: config for " + cfg.JournalDir() + `: canonjson: JSON at byte 19: duplicate key "name": canonjson: invalid JSON`
	if _, err := openJournal(cfg, dup, 1<<20); err == nil || err.Error() != want || !errors.Is(err, canonjson.ErrInvalidJSON) {
		t.Fatalf("duplicate key: %v, want %q", err, want)
	}
	if _, err := os.Stat(cfg.StateDir + "/journal"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused config left a journal: %v", err)
	}
}
