package audit

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fxamacker/cbor/v2"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire"
)

// A verified point is what `receipts verify` carries after it verified
// journal records 1..N with no fault and no finding (pointState), bound
// to the journal's mark at N, so that a later verify goes on from it
// (journal.Options.From) and checks only the records after it, with the
// same report a verify from record 1 gives. The file is deterministic
// CBOR, decoded strictly:
//
//	{format: "steward-audit-point", version: 1,
//	 store: the journal's bound config (hostlog.Config: the operator key's kid),
//	 content: CBOR {mark, state},
//	 sig: wire.SignHybrid by the operator key over
//	      SHA-256("steward-audit-point-v1\n" || CBOR [format, version, store, content])}
//
// The audit never holds the private key: whoever writes a point passes a
// sign func (the CLI, from the store's operator.key); it is verified with
// the public key the store pinned (operator.pub). The store is checked
// before the signature, so that a point of another store is said so.

const (
	// PointFormat names the point file's format, PointVersion its version.
	PointFormat  = "steward-audit-point"
	PointVersion = 1

	// MaxPointBytes bounds a point file. What it carries is bounded by what
	// is under way (the open reservations, the chain's and the ledger's
	// windows): a point is kilobytes to a few megabytes, and a file past
	// this is refused before it is decoded.
	MaxPointBytes = 64 << 20

	pointDomain = "steward-audit-point-v1\n"
)

// SignFunc signs a point's digest with the operator key
// (wire.SignHybrid).
type SignFunc func(digest []byte) ([]byte, error)

// pointFile is the file.
type pointFile struct {
	Format  string `cbor:"format"`
	Version uint64 `cbor:"version"`
	Store   []byte `cbor:"store"`
	Content []byte `cbor:"content"`
	Sig     []byte `cbor:"sig"`
}

// pointContent is what the signature covers beside the envelope's names.
type pointContent struct {
	Mark  journal.Mark `cbor:"mark"`
	State pointState   `cbor:"state"`
}

var (
	pointEnc cbor.EncMode
	pointDec cbor.DecMode
)

func init() {
	var err error
	if pointEnc, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	strict := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   12,
		MaxArrayElements:  4 * ledgerWindow,
		MaxMapPairs:       32,
	}
	if pointDec, err = strict.DecMode(); err != nil {
		panic(err)
	}
}

// pointDigest is what a point's signature signs.
func pointDigest(f pointFile) ([]byte, error) {
	b, err := pointEnc.Marshal([]any{f.Format, f.Version, f.Store, f.Content})
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(pointDomain))
	h.Write(b)
	return h.Sum(nil), nil
}

// encodePoint is the signed file of state st at mark m, for the store
// of operator key pub.
func encodePoint(pub *wire.HybridPublicKey, m journal.Mark, st pointState, sign SignFunc) ([]byte, error) {
	if sign == nil {
		return nil, errors.New("audit: a point needs the operator key's signature")
	}
	content, err := pointEnc.Marshal(pointContent{Mark: m, State: st})
	if err != nil {
		return nil, fmt.Errorf("audit: encode the point: %w", err)
	}
	f := pointFile{Format: PointFormat, Version: PointVersion, Store: hostlog.Config(pub), Content: content}
	d, err := pointDigest(f)
	if err != nil {
		return nil, err
	}
	if f.Sig, err = sign(d); err != nil {
		return nil, fmt.Errorf("audit: sign the point: %w", err)
	}
	b, err := pointEnc.Marshal(f)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPointBytes {
		return nil, fmt.Errorf("audit: the point is %d bytes, past the bound of %d", len(b), MaxPointBytes)
	}
	return b, nil
}

// point is a point file verified for a store: its mark and its state.
type point struct {
	name  string
	mark  journal.Mark
	state pointState
}

// decodePointFile decodes a point file's envelope strictly, and checks its
// format and version.
func decodePointFile(b []byte) (pointFile, error) {
	var f pointFile
	if len(b) > MaxPointBytes {
		return f, fmt.Errorf("it is %d bytes, past the bound of %d", len(b), MaxPointBytes)
	}
	if err := pointDec.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("it is not a point file: %v", err)
	}
	if f.Format != PointFormat || f.Version != PointVersion {
		return f, fmt.Errorf("it is %q version %d, not %s version %d", trunc(f.Format, 64), f.Version, PointFormat, PointVersion)
	}
	return f, nil
}

// openPoint verifies the point file b (named name) for the store of the
// operator key pub: its envelope, that it is this store's, its signature
// under pub, then its content, strictly. Its error is one line, a fault.
func openPoint(name string, b []byte, pub *wire.HybridPublicKey) (*point, error) {
	f, err := decodePointFile(b)
	if err != nil {
		return nil, faultf("point %s: %v", name, err)
	}
	if want := hostlog.Config(pub); !bytes.Equal(f.Store, want) {
		return nil, faultf("point %s is of another store (%s), not this one (%s)", name, trunc(string(f.Store), 120), want)
	}
	d, err := pointDigest(f)
	if err != nil {
		return nil, faultf("point %s: %v", name, err)
	}
	payload, err := wire.VerifyHybrid(f.Sig, pub)
	if err != nil || !bytes.Equal(payload, d) {
		return nil, faultf("point %s: its signature does not verify under the store's operator key %s", name, pub.KID())
	}
	var c pointContent
	if err := pointDec.Unmarshal(f.Content, &c); err != nil {
		return nil, faultf("point %s: its content: %v", name, err)
	}
	m := c.Mark
	switch {
	case m.Owner != hostlog.Owner || m.Format != hostlog.Format || !bytes.Equal(m.Config, hostlog.Config(pub)):
		return nil, faultf("point %s: its mark is not of this store's journal", name)
	case m.Seq == 0 || m.Seq != c.State.Records:
		return nil, faultf("point %s: its mark at journal record %d is not where its state is (%d)", name, m.Seq, c.State.Records)
	}
	return &point{name: name, mark: m, state: c.State}, nil
}

// PointFileOf is the point `history archive` writes beside the archive
// directory dir: dir + ".point".
func PointFileOf(dir string) string { return filepath.Clean(dir) + ".point" }
