package hostlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stewardrt/steward/canonjson"
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/wire"
)

// The host journal's identity (journal.Options): every host journal is
// bound to these and to its store's operator key (Config).
const (
	Owner  = "steward-operator"
	Format = "steward-host-journal-v1"
)

// Where an operator store keeps what binds and holds its journal (the
// rest of the store's layout is package operator's).
const (
	// PubFile is the operator's public COSE_KeySet (0644), which the
	// journal is bound to and verifiers read.
	PubFile = "operator.pub"
	// JournalDir is the host journal's directory (package journal).
	JournalDir = "journal"
)

// storeConfig is the journal's bound config: the store's identity.
type storeConfig struct {
	OperatorKID string `json:"operatorKid"`
}

// Config is the config the host journal binds for the operator key pub:
// the canonical JSON of {"operatorKid": KID}, the kid of its Ed25519 half
// (the journal binds the bytes it is given; these are the bytes every
// host journal holds).
func Config(pub *wire.HybridPublicKey) []byte {
	b, err := json.Marshal(storeConfig{OperatorKID: pub.KID().String()})
	if err == nil {
		b, err = canonjson.CanonicalJSON(b)
	}
	if err != nil {
		// A struct of one string always encodes, and encoding/json's output
		// is valid JSON without duplicate keys.
		panic("hostlog: the store config does not encode: " + err.Error())
	}
	return b
}

// Options is the journal.Options of the host journal of operator key pub:
// its identity and binding (callers add SegmentSize or ReadOnly).
func Options(pub *wire.HybridPublicKey) journal.Options {
	return journal.Options{Owner: Owner, Format: Format, Config: Config(pub)}
}

// ReadPub reads the operator's public key from the PubFile of the store
// in dir: what its journal is bound to.
func ReadPub(dir string) (*wire.HybridPublicKey, error) {
	b, err := os.ReadFile(filepath.Join(dir, PubFile))
	if err != nil {
		return nil, err
	}
	pub, err := wire.ParseHybridPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, PubFile), err)
	}
	return pub, nil
}

// OpenReadOnly opens the host journal of the operator store in dir for
// reading, bound to the operator key in its PubFile, and returns that key:
// it takes no lock and never writes, so it works while the host runs.
func OpenReadOnly(dir string) (*journal.Journal, *wire.HybridPublicKey, error) {
	pub, err := ReadPub(dir)
	if err != nil {
		return nil, nil, err
	}
	o := Options(pub)
	o.ReadOnly = true
	j, err := journal.Open(filepath.Join(dir, JournalDir), o)
	if err != nil {
		return nil, nil, err
	}
	return j, pub, nil
}
